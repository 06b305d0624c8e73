package controllers

import (
	"encoding/json"

	corev1 "k8s.io/api/core/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
)

// asApplyConfiguration turns a typed core value into its apply configuration through
// JSON: apply configurations mirror the types field for field, and quantities come out
// in their canonical form, the form the apiserver stores.
func asApplyConfiguration[T any](in any) *T {
	data, err := json.Marshal(in)
	if err != nil {
		panic("marshal " + err.Error()) // core API types always marshal
	}
	out := new(T)
	if err := json.Unmarshal(data, out); err != nil {
		panic("unmarshal " + err.Error()) // apply configurations mirror the types
	}
	return out
}

func resources(r corev1.ResourceRequirements) *corev1ac.ResourceRequirementsApplyConfiguration {
	if len(r.Limits) == 0 && len(r.Requests) == 0 && len(r.Claims) == 0 {
		return nil
	}
	return asApplyConfiguration[corev1ac.ResourceRequirementsApplyConfiguration](r)
}

func toleration(t corev1.Toleration) *corev1ac.TolerationApplyConfiguration {
	return asApplyConfiguration[corev1ac.TolerationApplyConfiguration](t)
}

func affinity(a *corev1.Affinity) *corev1ac.AffinityApplyConfiguration {
	return asApplyConfiguration[corev1ac.AffinityApplyConfiguration](a)
}

// asApplyConfigurationInto is asApplyConfiguration into out, in either direction.
func asApplyConfigurationInto(in, out any) {
	data, err := json.Marshal(in)
	if err != nil {
		panic("marshal " + err.Error())
	}
	if err := json.Unmarshal(data, out); err != nil {
		panic("unmarshal " + err.Error())
	}
}

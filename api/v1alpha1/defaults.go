package v1alpha1

import (
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
)

// Defaults of the spec, the same values as the +default markers: the
// apiserver applies the markers, these apply to objects built in Go (tests, tools)
// that never went through an apiserver.
const (
	DefaultReplicas                  int32 = 1
	DefaultBasePath                        = "/"
	DefaultPort                      int32 = 8080
	DefaultConfigMapKey                    = "ferrofed.toml"
	DefaultClientCAKey                     = "ca.crt"
	DefaultReadinessPeriodSeconds    int32 = 5
	DefaultReadinessFailureThreshold int32 = 2
	DefaultReadinessTimeoutSeconds   int32 = 1
	DefaultStartupPeriodSeconds      int32 = 2
	DefaultStartupFailureThreshold   int32 = 30
	DefaultStartupTimeoutSeconds     int32 = 1
	DefaultLivenessPeriodSeconds     int32 = 10
	DefaultLivenessFailureThreshold  int32 = 3
	DefaultLivenessTimeoutSeconds    int32 = 1
)

// ReplicasOrDefault is spec.replicas with its default applied.
func (s *GatewaySpec) ReplicasOrDefault() int32 { return ptr.Deref(s.Replicas, DefaultReplicas) }

// Autoscaled reports whether a HorizontalPodAutoscaler sets the number of pods
// (spec.autoscaling).
func (s *GatewaySpec) Autoscaled() bool { return s.Autoscaling != nil }

// FloorReplicas is the fewest pods the spec asks for: spec.autoscaling.minReplicas, or
// spec.replicas with its default applied.
func (s *GatewaySpec) FloorReplicas() int32 {
	if s.Autoscaling != nil {
		return s.Autoscaling.MinReplicas
	}
	return s.ReplicasOrDefault()
}

// CPUTarget is spec.autoscaling's CPU utilization target, with its default (80 when no
// target is set); false when there is none.
func (a *Autoscaling) CPUTarget() (int32, bool) {
	switch {
	case a.TargetCPUUtilizationPercentage != nil:
		return *a.TargetCPUUtilizationPercentage, true
	case a.TargetMemoryUtilizationPercentage == nil:
		return DefaultTargetCPUUtilizationPercentage, true
	}
	return 0, false
}

// PortOrDefault is spec.port with its default applied.
func (s *GatewaySpec) PortOrDefault() int32 {
	if s.Port == 0 {
		return DefaultPort
	}
	return s.Port
}

// BasePathOrDefault is spec.basePath with its default applied.
func (s *GatewaySpec) BasePathOrDefault() string {
	if s.BasePath == "" {
		return DefaultBasePath
	}
	return s.BasePath
}

// ClientCertificatesRequired reports whether the listener requires client
// certificates (spec.tls.clientCASecret): the probes are then exec probes.
func (s *GatewaySpec) ClientCertificatesRequired() bool {
	return s.TLS != nil && s.TLS.ClientCASecret != nil
}

// KeyOrDefault is the key with its default applied.
func (r *SecretKeyRef) KeyOrDefault() string {
	if r.Key == "" {
		return DefaultClientCAKey
	}
	return r.Key
}

// MaxInlineConfigBytes is the most of spec.config.inline that admission renders and
// checks: the CRD's maxLength (262144, which the apiserver counts in characters), here
// in bytes, so that the webhook's work on one review is bounded by its bytes whatever
// the characters are.
const MaxInlineConfigBytes = 262144

// DefaultAuditSpoolSizeLimit is spec.audit.spool.sizeLimit's default.
var DefaultAuditSpoolSizeLimit = resource.MustParse("1Gi")

// Bounds of spec.audit.spool.sizeLimit, as its CEL rule has them.
var (
	MinAuditSpoolSizeLimit = resource.MustParse("4Mi")
	MaxAuditSpoolSizeLimit = resource.MustParse("128Gi")
)

// SpoolSizeLimit is spec.audit.spool.sizeLimit with its default applied.
func (s *GatewaySpec) SpoolSizeLimit() resource.Quantity {
	if s.Audit == nil || s.Audit.Spool == nil || s.Audit.Spool.SizeLimit == nil {
		return DefaultAuditSpoolSizeLimit
	}
	return *s.Audit.Spool.SizeLimit
}

// MaxSecretMounts is spec.secretMounts' MaxItems.
const MaxSecretMounts = 16

// MaxTopologySpreadConstraints is spec.topologySpreadConstraints' MaxItems.
const MaxTopologySpreadConstraints = 8

// PersistentSpool reports whether the spools live in a claim per replica
// (spec.audit.spool.volumeClaimTemplate): the gateway then runs as a StatefulSet.
func (s *GatewaySpec) PersistentSpool() bool {
	return s.Audit != nil && s.Audit.Spool != nil && s.Audit.Spool.VolumeClaimTemplate != nil
}

// RetainSpoolClaimsOnDelete is spec.audit.spool.retainOnDelete with its default.
func (s *GatewaySpec) RetainSpoolClaimsOnDelete() bool {
	return s.Audit != nil && s.Audit.Spool != nil && ptr.Deref(s.Audit.Spool.RetainOnDelete, false)
}

// SpoolClaimStorage is spec.audit.spool.volumeClaimTemplate.spec.resources.requests.storage,
// and whether it is set.
func (s *GatewaySpec) SpoolClaimStorage() (resource.Quantity, bool) {
	if !s.PersistentSpool() || s.Audit.Spool.VolumeClaimTemplate.Spec == nil {
		return resource.Quantity{}, false
	}
	q, ok := s.Audit.Spool.VolumeClaimTemplate.Spec.Resources.Requests["storage"]
	return q, ok
}

// Bounds of spec.tracing, the gateway's own (gateway/config, [tracing]).
const (
	// MaxTracingTimeout bounds spec.tracing.timeout (tracing.timeout_ms's maximum).
	MaxTracingTimeout = 60 * time.Second
)

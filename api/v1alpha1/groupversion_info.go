// Package v1alpha1 is the ferrofed.io/v1alpha1 API: the Gateway and StoredQuery
// resources, their defaults and CEL rules (markers read by controller-gen), their
// condition types and reasons, and nothing else. The mapping of a spec onto
// gateway/lifecycle and ferrofed.toml is internal/gatewayspec's; the validating
// admission webhook the operator serves is internal/webhook's. This package stays types
// only so that a client of the API does not link the gateway (test/layout's
// TestTheAPIIsTypesOnly).
//
// +kubebuilder:object:generate=true
// +groupName=ferrofed.io
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of every type in this package.
	GroupVersion = schema.GroupVersion{Group: "ferrofed.io", Version: "v1alpha1"}

	// SchemeBuilder registers the types of this package with a scheme, with
	// apimachinery only (the API package needs no controller-runtime).
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the types of this package to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &Gateway{}, &GatewayList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}

package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// MaxStoredQueryDefinitionBytes bounds spec.definition (the gateway's own limit of one
// OperationDefinition, 64 KiB).
const MaxStoredQueryDefinitionBytes = 65536

// StoredQuerySpec is one stored query of one Gateway.
type StoredQuerySpec struct {
	// gatewayName is the Gateway, in the StoredQuery's namespace, whose pods get the
	// stored query. The operator makes that Gateway the StoredQuery's owner, so that the
	// StoredQuery goes with it. Required; at most 63 characters.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.gatewayName is immutable: make a StoredQuery for the other Gateway instead"
	GatewayName string `json:"gatewayName,omitempty"`

	// definition is the stored query, a FHIR OperationDefinition of kind query in JSON
	// carrying its template in the extension
	// https://ferrofed.io/fhir/StructureDefinition/stored-query-template, exactly as
	// POST /operator/stored-queries takes it. Its id names the file (id.json) the
	// gateway reads; the gateway checks the rest and lists a definition it refuses
	// under problems of GET /operator/stored-queries. Required; at most 65536 bytes.
	// +required
	// +kubebuilder:validation:MinLength=2
	// +kubebuilder:validation:MaxLength=65536
	Definition string `json:"definition,omitempty"`
}

// StoredQueryStatus is what the operator did with a StoredQuery.
type StoredQueryStatus struct {
	// conditions has Rendered (see ConditionRendered).
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// RenderedConditions is the status's conditions, none before the operator wrote one.
func (sq *StoredQuery) RenderedConditions() []metav1.Condition {
	if sq.Status == nil {
		return nil
	}
	return sq.Status.Conditions
}

// ConditionRendered is True when the StoredQuery is a key of its Gateway's
// stored-query ConfigMap (ReasonRendered); False when the operator left it out
// (ReasonStoredQueryLeftOut, the message says why) or its Gateway does not exist
// (ReasonGatewayNotFound).
const ConditionRendered = "Rendered"

// Reasons of ConditionRendered.
const (
	// ReasonRendered surfaces on Rendered=True.
	ReasonRendered = "Rendered"
	// ReasonStoredQueryLeftOut surfaces on Rendered=False when spec.definition has no
	// usable FHIR id, another StoredQuery of the Gateway (earlier by name) has its id,
	// or the Gateway's ConfigMap has no room left for it.
	ReasonStoredQueryLeftOut = "LeftOut"
	// ReasonGatewayNotFound surfaces on Rendered=False when spec.gatewayName names no
	// Gateway of the namespace.
	ReasonGatewayNotFound = "GatewayNotFound"
)

// StoredQuery is a named query template of a Gateway: the operator
// renders every StoredQuery naming a Gateway into the ConfigMap <gateway>-stored-queries,
// which every pod of the Gateway mounts as its stored-query store, so that every
// replica has the same queries. A gateway whose store is this ConfigMap answers an
// upload on its operator surface with 409, naming this kind.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=fsq,scope=Namespaced
// +kubebuilder:printcolumn:name="Gateway",type=string,JSONPath=`.spec.gatewayName`
// +kubebuilder:printcolumn:name="Rendered",type=string,JSONPath=`.status.conditions[?(@.type=="Rendered")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type StoredQuery struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the object's metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the stored query and the Gateway it belongs to.
	// +required
	Spec StoredQuerySpec `json:"spec,omitzero"`

	// status is what the operator did with it.
	// +optional
	Status *StoredQueryStatus `json:"status,omitempty"`
}

// StoredQueryList is a list of StoredQueries.
//
// +kubebuilder:object:root=true
type StoredQueryList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []StoredQuery `json:"items"`
}

func init() {
	SchemeBuilder.Register(func(s *runtime.Scheme) error {
		s.AddKnownTypes(GroupVersion, &StoredQuery{}, &StoredQueryList{})
		return nil
	})
}

package v1alpha1

import (
	"context"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// WebhookPath is where the operator serves the Gateway validating webhook.
const WebhookPath = "/validate-ferrofed-io-v1alpha1-gateway"

// +kubebuilder:webhook:path=/validate-ferrofed-io-v1alpha1-gateway,mutating=false,failurePolicy=fail,sideEffects=None,groups=ferrofed.io,resources=gateways,verbs=create;update,versions=v1alpha1,name=vgateway.ferrofed.io,admissionReviewVersions=v1

// GatewayValidator is the validating admission webhook of Gateways: Gateway.Validate
// and, when AllowedImages is set, the operator's image allow-list, refused with
// apierrors.NewInvalid; lifecycle's warnings as admission warnings.
type GatewayValidator struct {
	// AllowedImages are the operator's --allowed-images patterns (ImageAllowed); empty
	// allows every image.
	AllowedImages []string
}

// GatewayValidator is served as the webhook's http.Handler (ServeHTTP); its Validate*
// methods are controller-runtime's admission.Validator of a typed Gateway.
var (
	_ http.Handler                  = GatewayValidator{}
	_ admission.Validator[*Gateway] = GatewayValidator{}
)

// ValidateCreate validates a new Gateway.
func (v GatewayValidator) ValidateCreate(_ context.Context, g *Gateway) (admission.Warnings, error) {
	return v.validate(g)
}

// ValidateUpdate validates a changed Gateway as a whole; nothing is immutable, and the
// old Gateway is not read (ServeHTTP does not decode it).
func (v GatewayValidator) ValidateUpdate(_ context.Context, _, g *Gateway) (admission.Warnings, error) {
	return v.validate(g)
}

// ValidateDelete allows every deletion.
func (GatewayValidator) ValidateDelete(context.Context, *Gateway) (admission.Warnings, error) {
	return nil, nil
}

func (v GatewayValidator) validate(g *Gateway) (admission.Warnings, error) {
	errs, warnings := g.Validate()
	if !ImageAllowed(v.AllowedImages, g.Spec.Image) {
		errs = append(errs, field.Invalid(field.NewPath("spec", "image"), g.Spec.Image, ImageMessage(v.AllowedImages, g.Spec.Image)))
	}
	if len(errs) > 0 {
		return warnings, apierrors.NewInvalid(GroupVersion.WithKind("Gateway").GroupKind(), g.Name, errs)
	}
	return warnings, nil
}

// Package webhook is the validating admission webhook of Gateways the operator serves:
// the AdmissionReview HTTP handler (ServeHTTP) and GatewayValidator, which refuses what
// internal/gatewayspec's Validate refuses and what the operator's image policy does not
// allow. Its +kubebuilder:webhook marker is the source of config/webhook.
package webhook

import (
	"context"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	ferrofedv1alpha1 "github.com/ferrofed/ferrofed/api/v1alpha1"
	"github.com/ferrofed/ferrofed/internal/gatewayspec"
)

// WebhookPath is where the operator serves the Gateway validating webhook.
const WebhookPath = "/validate-ferrofed-io-v1alpha1-gateway"

// +kubebuilder:webhook:path=/validate-ferrofed-io-v1alpha1-gateway,mutating=false,failurePolicy=fail,sideEffects=None,groups=ferrofed.io,resources=gateways,verbs=create;update,versions=v1alpha1,name=vgateway.ferrofed.io,admissionReviewVersions=v1

// GatewayValidator is the validating admission webhook of Gateways: gatewayspec.Validate
// and, when AllowedImages is set, the operator's image allow-list, refused with
// apierrors.NewInvalid; Validate's warnings (lifecycle's, config check's) as admission
// warnings.
type GatewayValidator struct {
	// AllowedImages are the operator's --allowed-images patterns (ImageAllowed); empty
	// allows every image.
	AllowedImages []string
}

// GatewayValidator is served as the webhook's http.Handler (ServeHTTP); its Validate*
// methods are controller-runtime's admission.Validator of a typed Gateway.
var (
	_ http.Handler                                   = GatewayValidator{}
	_ admission.Validator[*ferrofedv1alpha1.Gateway] = GatewayValidator{}
)

// ValidateCreate validates a new Gateway.
func (v GatewayValidator) ValidateCreate(_ context.Context, g *ferrofedv1alpha1.Gateway) (admission.Warnings, error) {
	return v.validate(g)
}

// ValidateUpdate validates a changed Gateway as a whole; nothing is immutable, and the
// old Gateway is not read (ServeHTTP does not decode it). A Gateway being deleted is
// not validated: the operator removes its hand-over finalizer with an update, which a
// rule made stricter since its admission must not block (the operator checks the image
// itself before it starts a hand-over Job; docs/operator.md, "The persistent audit
// spool").
func (v GatewayValidator) ValidateUpdate(_ context.Context, _, g *ferrofedv1alpha1.Gateway) (admission.Warnings, error) {
	if g.DeletionTimestamp != nil {
		return nil, nil
	}
	return v.validate(g)
}

// ValidateDelete allows every deletion.
func (GatewayValidator) ValidateDelete(context.Context, *ferrofedv1alpha1.Gateway) (admission.Warnings, error) {
	return nil, nil
}

func (v GatewayValidator) validate(g *ferrofedv1alpha1.Gateway) (admission.Warnings, error) {
	errs, warnings := gatewayspec.Validate(g)
	if !gatewayspec.ImageAllowed(v.AllowedImages, g.Spec.Image) {
		errs = append(errs, field.Invalid(field.NewPath("spec", "image"), g.Spec.Image, gatewayspec.ImageMessage(v.AllowedImages, g.Spec.Image)))
	}
	if len(errs) > 0 {
		return warnings, apierrors.NewInvalid(ferrofedv1alpha1.GroupVersion.WithKind("Gateway").GroupKind(), g.Name, errs)
	}
	return warnings, nil
}

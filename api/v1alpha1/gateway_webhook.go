package v1alpha1

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// WebhookPath is where the operator serves the Gateway validating webhook.
const WebhookPath = "/validate-ferrofed-io-v1alpha1-gateway"

// +kubebuilder:webhook:path=/validate-ferrofed-io-v1alpha1-gateway,mutating=false,failurePolicy=fail,sideEffects=None,groups=ferrofed.io,resources=gateways,verbs=create;update,versions=v1alpha1,name=vgateway.ferrofed.io,admissionReviewVersions=v1

// GatewayValidator is the validating admission webhook of Gateways: Gateway.Validate,
// refused with apierrors.NewInvalid, and lifecycle's warnings as admission warnings.
type GatewayValidator struct{}

var _ admission.Validator[*Gateway] = GatewayValidator{}

// SetupWebhookWithManager registers the validating webhook with the manager's server.
func SetupWebhookWithManager(mgr ctrl.Manager) error {
	return ctrl.NewWebhookManagedBy(mgr, &Gateway{}).WithValidator(GatewayValidator{}).Complete()
}

// ValidateCreate validates a new Gateway.
func (GatewayValidator) ValidateCreate(_ context.Context, g *Gateway) (admission.Warnings, error) {
	return validate(g)
}

// ValidateUpdate validates a changed Gateway as a whole; nothing is immutable.
func (GatewayValidator) ValidateUpdate(_ context.Context, _, g *Gateway) (admission.Warnings, error) {
	return validate(g)
}

// ValidateDelete allows every deletion.
func (GatewayValidator) ValidateDelete(context.Context, *Gateway) (admission.Warnings, error) {
	return nil, nil
}

func validate(g *Gateway) (admission.Warnings, error) {
	errs, warnings := g.Validate()
	if len(errs) > 0 {
		return warnings, apierrors.NewInvalid(GroupVersion.WithKind("Gateway").GroupKind(), g.Name, errs)
	}
	return warnings, nil
}

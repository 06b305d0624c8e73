// Package webhook is the validating admission webhook of Gateways the operator serves:
// the AdmissionReview HTTP handler (ServeHTTP) and GatewayValidator, which refuses what
// internal/gatewayspec's Validate refuses and what the operator's image policy does not
// allow. Its +kubebuilder:webhook marker is the source of config/webhook.
package webhook

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
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
// warnings. For a spec.config.configMapRef it reads the ConfigMap (readConfig) for the
// warnings of its content, never to refuse (gatewayspec.ValidateReferenced).
type GatewayValidator struct {
	// AllowedImages are the operator's --allowed-images patterns (ImageAllowed); empty
	// allows every image.
	AllowedImages []string
	// ConfigMaps reads the ConfigMap a spec.config.configMapRef names, by name (the
	// operator's API reader: ConfigMaps are never cached whole). Nil: no ConfigMap is
	// read, and a configMapRef draws the warning that its configuration could not be.
	ConfigMaps client.Reader
}

// ConfigMapReadTimeout bounds the webhook's read of a referenced ConfigMap, well within
// the review's budget (reviewBudget, 3/4 of the webhook's timeout).
const ConfigMapReadTimeout = 2 * time.Second

// MaxReferencedConfigBytes is the most of a referenced configuration (the value of its
// key) the webhook renders and checks: what a ConfigMap holds at most, the apiserver's
// limit on its data (corev1.MaxSecretSize, 1 MiB), which is all the controller can be
// given to render (it reads the key whole, as ConfigMaps hold it) and what it holds
// its own ConfigMaps under (controllers.MaxStoredQueriesBytes). The read itself is
// bounded by that limit too, and by ConfigMapReadTimeout.
const MaxReferencedConfigBytes = corev1.MaxSecretSize

// GatewayValidator is served as the webhook's http.Handler (ServeHTTP); its Validate*
// methods are controller-runtime's admission.Validator of a typed Gateway.
var (
	_ http.Handler                                   = GatewayValidator{}
	_ admission.Validator[*ferrofedv1alpha1.Gateway] = GatewayValidator{}
)

// ValidateCreate validates a new Gateway.
func (v GatewayValidator) ValidateCreate(ctx context.Context, g *ferrofedv1alpha1.Gateway) (admission.Warnings, error) {
	return v.validate(ctx, g)
}

// ValidateUpdate validates a changed Gateway as a whole; nothing is immutable, and the
// old Gateway is not read (ServeHTTP does not decode it). A Gateway being deleted is
// not validated: the operator removes its hand-over finalizer with an update, which a
// rule made stricter since its admission must not block (the operator checks the image
// itself before it starts a hand-over Job; docs/operator.md, "The persistent audit
// spool").
func (v GatewayValidator) ValidateUpdate(ctx context.Context, _, g *ferrofedv1alpha1.Gateway) (admission.Warnings, error) {
	if g.DeletionTimestamp != nil {
		return nil, nil
	}
	return v.validate(ctx, g)
}

// ValidateDelete allows every deletion.
func (GatewayValidator) ValidateDelete(context.Context, *ferrofedv1alpha1.Gateway) (admission.Warnings, error) {
	return nil, nil
}

func (v GatewayValidator) validate(ctx context.Context, g *ferrofedv1alpha1.Gateway) (admission.Warnings, error) {
	errs, warnings := gatewayspec.ValidateReferenced(g, func(name, key string) ([]byte, error) {
		return v.readConfig(ctx, g.Namespace, name, key)
	})
	if !gatewayspec.ImageAllowed(v.AllowedImages, g.Spec.Image) {
		errs = append(errs, field.Invalid(field.NewPath("spec", "image"), g.Spec.Image, gatewayspec.ImageMessage(v.AllowedImages, g.Spec.Image)))
	}
	if len(errs) > 0 {
		return warnings, apierrors.NewInvalid(ferrofedv1alpha1.GroupVersion.WithKind("Gateway").GroupKind(), g.Name, errs)
	}
	return warnings, nil
}

// readConfig reads the value of key in the ConfigMap name of namespace ns, within
// ConfigMapReadTimeout, and at most MaxReferencedConfigBytes of it; its errors say why
// in a sentence a warning can carry.
func (v GatewayValidator) readConfig(ctx context.Context, ns, name, key string) ([]byte, error) {
	if v.ConfigMaps == nil {
		return nil, errors.New("the webhook has no client to read ConfigMaps with")
	}
	ctx, cancel := context.WithTimeout(ctx, ConfigMapReadTimeout)
	defer cancel()
	cm := &corev1.ConfigMap{}
	err := v.ConfigMaps.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, cm)
	switch {
	case apierrors.IsNotFound(err):
		return nil, fmt.Errorf("ConfigMap %s does not exist in namespace %s", name, ns)
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded):
		return nil, fmt.Errorf("reading ConfigMap %s took more than %s", name, ConfigMapReadTimeout)
	case err != nil:
		return nil, fmt.Errorf("read ConfigMap %s: %w", name, err)
	}
	data, ok := cm.Data[key]
	if !ok {
		return nil, fmt.Errorf("ConfigMap %s has no key %q in its data", name, key)
	}
	if len(data) > MaxReferencedConfigBytes {
		return nil, fmt.Errorf("its key %q holds %d bytes, more than the %d the webhook checks", key, len(data), MaxReferencedConfigBytes)
	}
	return []byte(data), nil
}

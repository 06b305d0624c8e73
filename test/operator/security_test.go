package operator_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ferrofedv1alpha1 "github.com/ferrofed/ferrofed/api/v1alpha1"
	"github.com/ferrofed/ferrofed/internal/gatewayspec"
)

// TestAnObjectOfTheGatewaysNameIsNeverAdopted: a user allowed to create Gateways must
// not take over a Service (or ConfigMap) that merely shares the Gateway's name.
func TestAnObjectOfTheGatewaysNameIsNeverAdopted(t *testing.T) {
	needControlPlane(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		other client.Object
		kind  string
	}{
		{"web", &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "reconcile", Name: "web"},
			Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"}, Ports: []corev1.ServicePort{{Port: 80}}}}, "Service"},
		{"web-config", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "reconcile", Name: "web-config"},
			Data: map[string]string{"index.html": "hello"}}, "ConfigMap"},
		// Missing from the cache (it has not the operator's label), it meets the
		// create-only apply, which must fail on it and leave it as it is.
		{"web-app", &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "reconcile", Name: "web-app"},
			Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "example.org/web"}}}}}}, "Deployment"},
	} {
		t.Run(tc.kind+" "+tc.name+" is left alone and named in the status and an event", func(t *testing.T) {
			if err := k8s.Create(ctx, tc.other); err != nil {
				t.Fatal(err)
			}
			key := types.NamespacedName{Namespace: "reconcile", Name: tc.name}
			if err := k8s.Create(ctx, newGateway(key.Namespace, key.Name, nil)); err != nil {
				t.Fatal(err)
			}
			eventually(t, settle, "Ready=False NameConflict", func() error {
				c := condition(getGateway(ctx, t, key), ferrofedv1alpha1.ConditionReady)
				if c.Reason != ferrofedv1alpha1.ReasonNameConflict || !strings.Contains(c.Message, tc.kind+" "+tc.name) {
					return fmt.Errorf("Ready = %s %s %q", c.Status, c.Reason, c.Message)
				}
				return nil
			})
			after := tc.other.DeepCopyObject().(client.Object)
			if err := k8s.Get(ctx, key, after); err != nil {
				t.Fatal(err)
			}
			if len(after.GetOwnerReferences()) != 0 || len(after.GetLabels()) != 0 {
				t.Errorf("%s %s was touched: owners %v, labels %v", tc.kind, tc.name, after.GetOwnerReferences(), after.GetLabels())
			}
			if svc, ok := after.(*corev1.Service); ok && svc.Spec.Selector["app"] != "web" {
				t.Errorf("the Service's selector was changed to %v", svc.Spec.Selector)
			}
			if dep, ok := after.(*appsv1.Deployment); ok && (dep.Spec.Template.Spec.Containers[0].Image != "example.org/web" || dep.Generation != 1) {
				t.Errorf("the Deployment was changed: image %s, generation %d", dep.Spec.Template.Spec.Containers[0].Image, dep.Generation)
			}
			eventually(t, settle, "a NameConflict event on the Gateway", func() error {
				var evs eventsv1.EventList
				if err := k8s.List(ctx, &evs, client.InNamespace(key.Namespace)); err != nil {
					return err
				}
				for _, e := range evs.Items {
					if e.Regarding.Name == tc.name && e.Regarding.Kind == "Gateway" && e.Reason == ferrofedv1alpha1.ReasonNameConflict &&
						strings.Contains(e.Note, tc.kind+" "+tc.name) {
						return nil
					}
				}
				return fmt.Errorf("no NameConflict event among %d", len(evs.Items))
			})
		})
	}
}

// TestDriftIsRepairedWhileTheConfigurationIsInvalid: a Gateway whose new configuration
// is refused keeps its last valid rendering applied, so that a grace period edited by
// hand is restored even then.
func TestDriftIsRepairedWhileTheConfigurationIsInvalid(t *testing.T) {
	needControlPlane(t)
	ctx := context.Background()
	key := types.NamespacedName{Namespace: "reconcile", Name: "invalid-then-drift"}
	if err := k8s.Create(ctx, newGateway(key.Namespace, key.Name, nil)); err != nil {
		t.Fatal(err)
	}
	_, dep := reconciled(ctx, t, key)
	hash := dep.Spec.Template.Annotations["ferrofed.io/config-hash"]
	updateGateway(ctx, t, key, func(g *ferrofedv1alpha1.Gateway) {
		g.Spec.Config = withIssuer("[health]\ncheck_timeout_ms = -5\n")
	})
	eventually(t, settle, "ConfigValid=False", func() error {
		if c := condition(getGateway(ctx, t, key), ferrofedv1alpha1.ConditionConfigValid); c.Status != metav1.ConditionFalse {
			return fmt.Errorf("ConfigValid = %s", c.Status)
		}
		return nil
	})
	if err := k8s.Get(ctx, key, dep); err != nil {
		t.Fatal(err)
	}
	dep.Spec.Template.Spec.TerminationGracePeriodSeconds = ptr.To[int64](1)
	if err := k8s.Update(ctx, dep, client.FieldOwner("someone-else")); err != nil {
		t.Fatal(err)
	}
	eventually(t, settle, "the grace period restored from the last valid rendering", func() error {
		if err := k8s.Get(ctx, key, dep); err != nil {
			return err
		}
		if g := ptr.Deref(dep.Spec.Template.Spec.TerminationGracePeriodSeconds, 0); g != 50 {
			return fmt.Errorf("terminationGracePeriodSeconds %d", g)
		}
		if h := dep.Spec.Template.Annotations["ferrofed.io/config-hash"]; h != hash {
			return fmt.Errorf("the pods were moved to configuration %s, not kept on the last valid %s", h, hash)
		}
		return nil
	})
}

// TestAForgedStatusIsRewritten: someone patching the status does not make it true.
func TestAForgedStatusIsRewritten(t *testing.T) {
	needControlPlane(t)
	ctx := context.Background()
	key := types.NamespacedName{Namespace: "reconcile", Name: "forged"}
	if err := k8s.Create(ctx, newGateway(key.Namespace, key.Name, nil)); err != nil {
		t.Fatal(err)
	}
	reconciled(ctx, t, key)
	gw := getGateway(ctx, t, key)
	patch := client.MergeFrom(gw.DeepCopy())
	gw.Status.TerminationGracePeriodSeconds = 1
	for i := range gw.Status.Conditions {
		if gw.Status.Conditions[i].Type == ferrofedv1alpha1.ConditionReady {
			gw.Status.Conditions[i].Status, gw.Status.Conditions[i].Reason = metav1.ConditionTrue, "Forged"
		}
	}
	if err := k8s.Status().Patch(ctx, gw, patch); err != nil {
		t.Fatal(err)
	}
	eventually(t, settle, "the status rewritten", func() error {
		g := getGateway(ctx, t, key)
		if c := condition(g, ferrofedv1alpha1.ConditionReady); c.Reason == "Forged" || g.Status.TerminationGracePeriodSeconds != 50 {
			return fmt.Errorf("Ready reason %s, grace %d", c.Reason, g.Status.TerminationGracePeriodSeconds)
		}
		return nil
	})
}

// TestThreeHundredProblemsStillWriteAStatus: the condition message is capped under the
// API's limit, with the first problems and a count of the rest.
func TestThreeHundredProblemsStillWriteAStatus(t *testing.T) {
	needControlPlane(t)
	ctx := context.Background()
	key := types.NamespacedName{Namespace: "reconcile", Name: "many-problems"}
	var b strings.Builder
	for i := range 300 {
		fmt.Fprintf(&b, "[[registry.members]]\nid = \"node-%d\"\nquery_endpoint = \"not a url %d\"\n", i, i)
	}
	if err := k8s.Create(ctx, newGateway(key.Namespace, key.Name, func(g *ferrofedv1alpha1.Gateway) {
		g.Spec.Config = withIssuer(b.String())
	})); err != nil {
		t.Fatal(err)
	}
	eventually(t, settle, "ConfigValid=False with a capped message", func() error {
		c := condition(getGateway(ctx, t, key), ferrofedv1alpha1.ConditionConfigValid)
		if c.Status != metav1.ConditionFalse {
			return fmt.Errorf("ConfigValid = %s", c.Status)
		}
		if len(c.Message) > 32768 || !strings.Contains(c.Message, "more line(s)") || !strings.Contains(c.Message, "registry.members[0]") {
			return fmt.Errorf("message of %d bytes: %.200q", len(c.Message), c.Message)
		}
		return nil
	})
	// The Event telling it too: the Events API keeps at most 1024 bytes of a note.
	eventually(t, settle, "an InvalidConfig event the API accepted", func() error {
		var evs eventsv1.EventList
		if err := k8s.List(ctx, &evs, client.InNamespace(key.Namespace)); err != nil {
			return err
		}
		for _, e := range evs.Items {
			if e.Regarding.Name == key.Name && e.Reason == ferrofedv1alpha1.ReasonInvalidConfig {
				return nil
			}
		}
		return fmt.Errorf("no InvalidConfig event among %d", len(evs.Items))
	})
}

// TestNamesThatCannotNameTheOwnedObjectsAreRefused runs on the CRD's CEL rules alone.
func TestNamesThatCannotNameTheOwnedObjectsAreRefused(t *testing.T) {
	needControlPlane(t)
	ctx := context.Background()
	for name, accept := range map[string]bool{
		strings.Repeat("a", 63): true,
		strings.Repeat("a", 64): false,
		"web.example":           false,
		"9lives":                false,
		"edge-1":                true,
	} {
		t.Run(name, func(t *testing.T) {
			err := k8s.Create(ctx, newGateway("cel-only", name, nil), client.DryRunAll)
			switch {
			case accept && err != nil:
				t.Fatalf("refused: %v", err)
			case !accept && (err == nil || !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "63 characters")):
				t.Fatalf("want a refusal naming the limit, got %v", err)
			}
		})
	}
}

// TestImagesOutsideTheAllowListAreRefused: the webhook refuses them, and the controller
// (for a Gateway admitted without the webhook) rolls nothing out.
func TestImagesOutsideTheAllowListAreRefused(t *testing.T) {
	needControlPlane(t)
	ctx := context.Background()
	evil := func(g *ferrofedv1alpha1.Gateway) { g.Spec.Image = "evil.example.com/miner:latest" }
	err := k8s.Create(ctx, newGateway("webhook", "evil-image", evil), client.DryRunAll)
	if err == nil || !strings.Contains(err.Error(), "--allowed-images") {
		t.Fatalf("the webhook admitted an image outside the allow-list: %v", err)
	}
	key := types.NamespacedName{Namespace: "reconcile", Name: "evil-image"}
	if err := k8s.Create(ctx, newGateway(key.Namespace, key.Name, evil)); err != nil {
		t.Fatal(err)
	}
	eventually(t, settle, "Ready=False ImageNotAllowed", func() error {
		if c := condition(getGateway(ctx, t, key), ferrofedv1alpha1.ConditionReady); c.Reason != ferrofedv1alpha1.ReasonImageNotAllowed {
			return fmt.Errorf("Ready = %s %s", c.Status, c.Reason)
		}
		return nil
	})
	if err := k8s.Get(ctx, key, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
		t.Errorf("something was rolled out for a disallowed image: %v", err)
	}
}

// TestThePageTokenSecretIsMadeOnceAndNeverAdopted: each Gateway gets a random key of
// its own in a Secret it controls, mounted into its pods and kept as it is across
// reconciles; a Secret of that name it does not control is never mounted.
func TestThePageTokenSecretIsMadeOnceAndNeverAdopted(t *testing.T) {
	needControlPlane(t)
	ctx := context.Background()
	key := types.NamespacedName{Namespace: "reconcile", Name: "paged"}
	if err := k8s.Create(ctx, newGateway(key.Namespace, key.Name, nil)); err != nil {
		t.Fatal(err)
	}
	gw, dep := reconciled(ctx, t, key)
	secretKey := types.NamespacedName{Namespace: key.Namespace, Name: gatewayspec.PageTokenSecretName(key.Name)}
	secret := &corev1.Secret{}
	if err := k8s.Get(ctx, secretKey, secret); err != nil {
		t.Fatal(err)
	}
	requireOwned(t, gw, secret)
	first := string(secret.Data[gatewayspec.PageTokenKey])
	if len(first) < 32 {
		t.Fatalf("the page-token key has %d bytes, want at least 32", len(first))
	}
	mounted := false
	for _, v := range dep.Spec.Template.Spec.Volumes {
		if v.Secret != nil && v.Secret.SecretName == secretKey.Name && len(v.Secret.Items) == 1 && v.Secret.Items[0].Key == gatewayspec.PageTokenKey {
			mounted = true
		}
	}
	if !mounted {
		t.Errorf("the Deployment does not mount Secret %s's key alone: %+v", secretKey.Name, dep.Spec.Template.Spec.Volumes)
	}
	updateGateway(ctx, t, key, func(g *ferrofedv1alpha1.Gateway) { g.Spec.Replicas = ptr.To[int32](2) })
	reconciled(ctx, t, key)
	if err := k8s.Get(ctx, secretKey, secret); err != nil {
		t.Fatal(err)
	}
	if string(secret.Data[gatewayspec.PageTokenKey]) != first {
		t.Errorf("the page-token key changed on a reconcile: next links handed out would stop working")
	}

	// A Secret of the name, made by someone else, before the Gateway.
	foreign := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: gatewayspec.PageTokenSecretName("stolen")},
		Data: map[string][]byte{"key": []byte("someone else's secret, not for the gateway's image to read")}}
	if err := k8s.Create(ctx, foreign); err != nil {
		t.Fatal(err)
	}
	stolen := types.NamespacedName{Namespace: key.Namespace, Name: "stolen"}
	if err := k8s.Create(ctx, newGateway(stolen.Namespace, stolen.Name, nil)); err != nil {
		t.Fatal(err)
	}
	eventually(t, settle, "Ready=False NameConflict naming the Secret", func() error {
		c := condition(getGateway(ctx, t, stolen), ferrofedv1alpha1.ConditionReady)
		if c.Reason != ferrofedv1alpha1.ReasonNameConflict || !strings.Contains(c.Message, "Secret "+foreign.Name) {
			return fmt.Errorf("Ready = %s %s %q", c.Status, c.Reason, c.Message)
		}
		return nil
	})
	if err := k8s.Get(ctx, stolen, &appsv1.Deployment{}); !apierrors.IsNotFound(err) {
		t.Errorf("a Deployment that would mount the foreign Secret exists: %v", err)
	}
}

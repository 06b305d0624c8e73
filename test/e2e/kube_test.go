//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ferrofed/ferrofed/test/double"
	"github.com/ferrofed/ferrofed/test/rollout"
)

var gatewayGVR = rollout.GatewayGVR

// eventually polls check until it reports done (double.EventuallyWithin), logging each
// new detail it gives and failing the test with the last one after timeout.
func eventually(t *testing.T, timeout time.Duration, what string, check func(ctx context.Context) (bool, string, error)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	detail := ""
	double.EventuallyWithin(t, timeout, what, func() bool {
		done, d, err := check(ctx)
		if err != nil {
			d = err.Error()
		}
		if !done && d != detail && d != "" {
			t.Logf("  waiting for %s: %s", what, d)
			detail = d
		}
		return done
	}, func() string { return detail })
}

// ---------------------------------------------------------------------------- Gateways

func gatewayObject(ns, name string, spec map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "ferrofed.io/v1alpha1",
		"kind":       "Gateway",
		"metadata":   map[string]any{"name": name, "namespace": ns},
		"spec":       spec,
	}}
}

func (c *cluster) createGateway(ctx context.Context, gw *unstructured.Unstructured) error {
	_, err := c.dyn.Resource(gatewayGVR).Namespace(gw.GetNamespace()).Create(ctx, gw, metav1.CreateOptions{})
	return err
}

// patchGateway merge-patches a Gateway's spec.
func (c *cluster) patchGateway(ctx context.Context, ns, name string, spec map[string]any) error {
	body, err := json.Marshal(map[string]any{"spec": spec})
	if err != nil {
		return err
	}
	_, err = c.dyn.Resource(gatewayGVR).Namespace(ns).Patch(ctx, name, types.MergePatchType, body, metav1.PatchOptions{})
	return err
}

func (c *cluster) getGateway(ctx context.Context, ns, name string) (*unstructured.Unstructured, error) {
	return c.dyn.Resource(gatewayGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
}

// ownedDeployment is the Deployment whose controller owner is the Gateway.
func (c *cluster) ownedDeployment(ctx context.Context, gw *unstructured.Unstructured) (*appsv1.Deployment, error) {
	return rollout.OwnedDeployment(ctx, c.kube, gw.GetNamespace(), gw.GetUID())
}

// ownedService is the Service whose controller owner is the Gateway.
func (c *cluster) ownedService(ctx context.Context, gw *unstructured.Unstructured) (*corev1.Service, error) {
	return rollout.OwnedService(ctx, c.kube, gw.GetNamespace(), gw.GetUID())
}

// ---------------------------------------------------------------------------- namespaces

func (c *cluster) freshNamespace(t *testing.T, ns string) {
	t.Helper()
	ctx := context.Background()
	if err := c.kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err == nil {
		t.Logf("deleting namespace %s left from an earlier run", ns)
	}
	eventually(t, 3*time.Minute, "namespace "+ns+" gone", func(ctx context.Context) (bool, string, error) {
		_, err := c.kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		return apierrors.IsNotFound(err), "still terminating", nil
	})
	if _, err := c.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace %s: %v", ns, err)
	}
}

// quickGateway creates a one-replica Gateway named name with the inline configuration
// and the bindings budget given, and startup and readiness probes of a second (a
// restarted container serves again within seconds); it waits until it is Ready, and
// deletes it when the step ends (unless FERROFED_E2E_KEEP=1).
func (s *e2e) quickGateway(t *testing.T, name, inline string, bindingsDrain time.Duration) *unstructured.Unstructured {
	t.Helper()
	spec := map[string]any{
		"replicas": 1,
		"image":    cfg.image,
		"lifecycle": map[string]any{
			"requestTimeout":       requestTimeout.String(),
			"bindingsDrainTimeout": bindingsDrain.String(),
		},
		"probes": map[string]any{
			"startup":   map[string]any{"periodSeconds": 1, "failureThreshold": 60},
			"readiness": map[string]any{"periodSeconds": 1, "failureThreshold": 2},
		},
		"config": map[string]any{"inline": inline},
	}
	ctx := context.Background()
	if err := s.c.createGateway(ctx, gatewayObject(cfg.namespace, name, spec)); err != nil {
		t.Fatalf("create Gateway %s: %v", name, err)
	}
	t.Cleanup(func() {
		if !cfg.keep {
			_ = s.c.dyn.Resource(gatewayGVR).Namespace(cfg.namespace).Delete(context.Background(), name, metav1.DeleteOptions{})
		}
	})
	return s.readyGateway(t, name, cfg.stepTimeout)
}

// readyGateway waits up to timeout until the Gateway name reports Ready=True, and
// returns it as it was read then.
func (s *e2e) readyGateway(t *testing.T, name string, timeout time.Duration) *unstructured.Unstructured {
	t.Helper()
	var gw *unstructured.Unstructured
	eventually(t, timeout, "Gateway "+name+" Ready", func(ctx context.Context) (bool, string, error) {
		got, err := s.c.getGateway(ctx, cfg.namespace, name)
		if err != nil {
			return false, "", err
		}
		gw = got
		st, reason := rollout.Condition(got, "Ready")
		return st == "True", "Ready=" + st + " " + reason, nil
	})
	return gw
}

// needIssuer starts the token issuer the gateway pods verify operator tokens against,
// unless an earlier step did; a machine the pods cannot reach skips the step.
func (s *e2e) needIssuer(t *testing.T) {
	t.Helper()
	if s.issuer != nil {
		return
	}
	host, err := rollout.NodeAddressOnThisMachine(context.Background(), s.c.kube)
	if err != nil {
		skipOffMachine(t, "no token issuer the pods can reach: "+err.Error())
	}
	if s.issuer, err = rollout.StartIssuer(host); err != nil {
		t.Fatal(err)
	}
}

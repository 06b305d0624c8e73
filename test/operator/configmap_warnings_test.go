package operator_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ferrofedv1alpha1 "github.com/ferrofed/ferrofed/api/v1alpha1"
	"github.com/ferrofed/ferrofed/test/doubles/issuer"
)

// TestWebhookWarnsOfReferencedConfigMap: through the apiserver, a Gateway whose
// configuration is a spec.config.configMapRef draws the warnings of the ConfigMap's
// content, the same as inline (an emptyDir spool's loss, a persistent spool's final
// sync under 2s, an open data plane), read in the Gateway's namespace under the key the
// ref names; a missing ConfigMap or key draws the "could not be read" warning and the
// Gateway is admitted.
func TestWebhookWarnsOfReferencedConfigMap(t *testing.T) {
	needControlPlane(t)
	ctx := context.Background()
	const ns = "webhook"
	for name, data := range map[string]map[string]string{
		"cm-emptydir-audit": {"ferrofed.toml": issuer.WithRemote(auditRepository)},
		"cm-keyed-audit":    {"gateway.toml": issuer.WithRemote(auditRepository)},
		"cm-open":           {"ferrofed.toml": memberTable + "[auth]\ndata_plane = \"open\"\n"},
	} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: data}
		if err := k8s.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = k8s.Delete(context.Background(), cm) })
	}
	ref := func(name, key string) func(*ferrofedv1alpha1.Gateway) {
		return func(g *ferrofedv1alpha1.Gateway) {
			g.Spec.Config = &ferrofedv1alpha1.GatewayConfig{ConfigMapRef: &ferrofedv1alpha1.ConfigMapKeyRef{Name: name, Key: key}}
		}
	}
	tests := []struct {
		name    string
		mutate  func(*ferrofedv1alpha1.Gateway)
		want    string
		notWant string
	}{
		{"an [audit] repository with an emptyDir spool", ref("cm-emptydir-audit", ""),
			"the audit spool is an emptyDir (spec.audit.spool, 1Gi): it survives container restarts but not the pod's deletion", "could not be read"},
		{"the key the ref names", ref("cm-keyed-audit", "gateway.toml"),
			"the audit spool is an emptyDir (spec.audit.spool, 1Gi)", "could not be read"},
		{"a persistent spool with a 1s bindingsDrainTimeout", all(ref("cm-emptydir-audit", ""), spoolClaim("1Gi", corev1.ReadWriteOnce),
			func(g *ferrofedv1alpha1.Gateway) { g.Spec.Lifecycle.BindingsDrainTimeout = dur("1s") }),
			"spec.lifecycle.bindingsDrainTimeout (1s) leaves less than 2s for the audit spool's final sync at shutdown", "emptyDir"},
		{"an open data plane", ref("cm-open", ""),
			`spec.config: auth.data_plane: is "open": anyone who can reach the gateway can search every member for every patient, with no token`, "could not be read"},
		{"a missing ConfigMap", ref("cm-missing", ""),
			`spec.config.configMapRef (ConfigMap cm-missing, key "ferrofed.toml") could not be read for warnings: ConfigMap cm-missing does not exist in namespace webhook`, ""},
		{"a missing key", ref("cm-open", "nope.toml"),
			`spec.config.configMapRef (ConfigMap cm-open, key "nope.toml") could not be read for warnings: ConfigMap cm-open has no key "nope.toml"`, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var warnings []string
			cfg := rest.CopyConfig(restConfig)
			cfg.WarningHandler = warningFunc(func(msg string) {
				mu.Lock()
				defer mu.Unlock()
				warnings = append(warnings, msg)
			})
			c, err := client.New(cfg, client.Options{Scheme: scheme})
			if err != nil {
				t.Fatal(err)
			}
			gw := newGateway(ns, "from-configmap", tc.mutate)
			if err := c.Create(ctx, gw, client.DryRunAll); err != nil {
				t.Fatalf("create: %v, want it admitted", err)
			}
			mu.Lock()
			defer mu.Unlock()
			all := strings.Join(warnings, "\n")
			if !strings.Contains(all, tc.want) {
				t.Errorf("warnings %q, want %q", warnings, tc.want)
			}
			if tc.notWant != "" && strings.Contains(all, tc.notWant) {
				t.Errorf("warnings %q, want none with %q", warnings, tc.notWant)
			}
		})
	}
}

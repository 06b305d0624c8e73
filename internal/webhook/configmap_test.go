package webhook

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ferrofedv1alpha1 "github.com/ferrofed/ferrofed/api/v1alpha1"
	"github.com/ferrofed/ferrofed/test/doubles/issuer"
)

// configMaps is a client.Reader of ConfigMaps: data by namespace/name, err for every
// read when set, or a read that waits for its context (block); it records the reads.
type configMaps struct {
	data  map[string]map[string]string
	err   error
	block bool
	reads []string
}

func (c *configMaps) Get(ctx context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	c.reads = append(c.reads, key.String())
	if c.block {
		<-ctx.Done()
		return ctx.Err()
	}
	if c.err != nil {
		return c.err
	}
	d, ok := c.data[key.String()]
	if !ok {
		return apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, key.Name)
	}
	obj.(*corev1.ConfigMap).Data = d
	return nil
}

func (c *configMaps) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return errors.New("not listed")
}

// TestWebhookReadsTheReferencedConfigMap: through ServeHTTP, a configMapRef is read in
// the review's namespace under the ref's key, and its content warned of; a ConfigMap
// missing, forbidden, too slow (ConfigMapReadTimeout), over MaxReferencedConfigBytes,
// or no reader at all, is admitted with the one warning saying why.
func TestWebhookReadsTheReferencedConfigMap(t *testing.T) {
	const audit = "[audit]\ndestination = 'repository'\nurl = 'https://a.example/fhir'\n"
	tests := []struct {
		name      string
		reader    *configMaps
		key       string
		want      string
		wantReads int
	}{
		{"read", &configMaps{data: map[string]map[string]string{"bench/cm": {"ferrofed.toml": issuer.WithRemote(audit)}}}, "",
			"the audit spool is an emptyDir (spec.audit.spool, 1Gi)", 1},
		{"the ref's key", &configMaps{data: map[string]map[string]string{"bench/cm": {"g.toml": issuer.WithRemote(audit)}}}, "g.toml",
			"the audit spool is an emptyDir", 1},
		{"missing", &configMaps{}, "",
			`spec.config.configMapRef (ConfigMap cm, key "ferrofed.toml") could not be read for warnings: ConfigMap cm does not exist in namespace bench`, 1},
		{"no such key", &configMaps{data: map[string]map[string]string{"bench/cm": {"other": ""}}}, "",
			`could not be read for warnings: ConfigMap cm has no key "ferrofed.toml" in its data`, 1},
		{"forbidden", &configMaps{err: apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "cm", errors.New("no get"))}, "",
			`could not be read for warnings: read ConfigMap cm: configmaps "cm" is forbidden`, 1},
		{"too large", &configMaps{data: map[string]map[string]string{"bench/cm": {"ferrofed.toml": strings.Repeat("#", MaxReferencedConfigBytes+1)}}}, "",
			`could not be read for warnings: its key "ferrofed.toml" holds 1048577 bytes, more than the 1048576 the webhook checks`, 1},
		{"too slow", &configMaps{block: true}, "", "could not be read for warnings: reading ConfigMap cm took more than 2s", 1},
		{"no reader", nil, "", "could not be read for warnings: the webhook has no client to read ConfigMaps with", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := GatewayValidator{}
			if tt.reader != nil {
				v.ConfigMaps = tt.reader
			}
			gw := &ferrofedv1alpha1.Gateway{Spec: ferrofedv1alpha1.GatewaySpec{Image: "i", Replicas: ptr.To(int32(2)),
				Config: &ferrofedv1alpha1.GatewayConfig{ConfigMapRef: &ferrofedv1alpha1.ConfigMapKeyRef{Name: "cm", Key: tt.key}}}}
			gw.Name = "g" // no namespace in the object: the review's, bench
			start := time.Now()
			out := answer(t, serve(v, admissionReview(t, admissionv1.Create, gw, nil)))
			if !out.Response.Allowed {
				t.Fatalf("refused: %v", out.Response.Result)
			}
			if took := time.Since(start); took > ConfigMapReadTimeout+time.Second {
				t.Errorf("took %s", took)
			}
			all := strings.Join(out.Response.Warnings, "\n")
			if !strings.Contains(all, tt.want) {
				t.Errorf("warnings %q, want %q", out.Response.Warnings, tt.want)
			}
			if n := strings.Count(all, "could not be read"); n > 1 {
				t.Errorf("%d could-not-read warnings, want at most one", n)
			}
			if tt.reader != nil && len(tt.reader.reads) != tt.wantReads {
				t.Errorf("reads %q, want %d", tt.reader.reads, tt.wantReads)
			}
			if tt.reader != nil && len(tt.reader.reads) == 1 && tt.reader.reads[0] != "bench/cm" {
				t.Errorf("read %q, want bench/cm", tt.reader.reads[0])
			}
		})
	}
}

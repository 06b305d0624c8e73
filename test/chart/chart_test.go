package chart

import (
	"bytes"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/ from the rendered chart")

// The chart is rendered as `helm install ferrofed charts/ferrofed -n ferrofed-system` would.
const (
	release   = "ferrofed"
	namespace = "ferrofed-system"
)

// generatedSecret matches the values helm's genCA/genSignedCert make afresh on every
// render; the golden files hold a placeholder instead.
var generatedSecret = regexp.MustCompile(`(?m)^(\s*(?:ca\.crt|tls\.crt|tls\.key|caBundle): )\S+$`)

func TestChartRendersAsTheGoldenFiles(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  []string
	}{
		{"default", nil},
		{"cert-manager", []string{"certManager.enabled=true"}},
		{"webhook-disabled", []string{"webhook.enabled=false"}},
	} {
		t.Run("with values "+tc.name+" the chart renders as testdata/"+tc.name+".yaml", func(t *testing.T) {
			args := []string{"template", release, chartDir(t), "--namespace", namespace}
			for _, s := range tc.set {
				args = append(args, "--set", s)
			}
			got := mustHelm(t, nil, args...)
			if tc.name == "default" {
				checkGeneratedCertificate(t, got)
			}
			got = generatedSecret.ReplaceAllString(got, "${1}<generated at install>")
			golden := filepath.Join("testdata", tc.name+".yaml")
			if *update {
				if err := os.MkdirAll("testdata", 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run make generate to write the golden files)", err)
			}
			if got != string(want) {
				t.Errorf("helm template differs from %s; if the change is intended, run make generate.\n%s", golden, lineDiff(string(want), got))
			}
		})
	}
}

// checkGeneratedCertificate holds the certificate generated at install to what the API
// server needs: the webhook configuration trusts the CA in the Secret, and the serving
// certificate is signed by it for the webhook Service's DNS name.
func checkGeneratedCertificate(t *testing.T, rendered string) {
	t.Helper()
	values := map[string]string{}
	for _, m := range generatedSecret.FindAllStringSubmatch(rendered, -1) {
		key := strings.TrimSuffix(strings.TrimSpace(m[1]), ":")
		values[key] = strings.TrimSpace(strings.TrimPrefix(m[0], m[1]))
	}
	if values["caBundle"] == "" || values["caBundle"] != values["ca.crt"] {
		t.Fatalf("the webhook's caBundle is not the Secret's ca.crt")
	}
	decode := func(key string) *x509.Certificate {
		raw, err := base64.StdEncoding.DecodeString(values[key])
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		block, _ := pem.Decode(raw)
		if block == nil {
			t.Fatalf("%s holds no PEM block", key)
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		return c
	}
	ca, leaf := decode("ca.crt"), decode("tls.crt")
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "ferrofed-webhook." + namespace + ".svc"}); err != nil {
		t.Fatalf("the serving certificate does not verify for the webhook Service: %v", err)
	}
}

// lineDiff shows the first lines where want and got differ.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b bytes.Buffer
	shown := 0
	for i := 0; i < len(w) || i < len(g); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			b.WriteString("line " + strconv.Itoa(i+1) + ":\n  want: " + wl + "\n  got:  " + gl + "\n")
			if shown++; shown == 10 {
				break
			}
		}
	}
	return b.String()
}

func TestChartRefusesWrongValues(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  []string
		want string
	}{
		{"a string for replicaCount", []string{"--set", "replicaCount=two"}, "/replicaCount"},
		{"a string for webhook.enabled", []string{"--set-string", "webhook.enabled=true"}, "/webhook/enabled"},
		{"a port out of range", []string{"--set", "metrics.port=70000"}, "/metrics/port"},
		{"an unknown failure policy", []string{"--set", "webhook.failurePolicy=Sometimes"}, "/webhook/failurePolicy"},
		{"an unknown pull policy", []string{"--set", "image.pullPolicy=Sometimes"}, "/image/pullPolicy"},
		{"a duration that is not one", []string{"--set", "certManager.duration=one year"}, "/certManager/duration"},
		{"an unknown top-level key", []string{"--set", "replicas=2"}, "replicas"},
		{"an unknown nested key", []string{"--set", "webhook.certDir=/x"}, "certDir"},
	} {
		t.Run("helm template refuses "+tc.name, func(t *testing.T) {
			args := append([]string{"template", release, chartDir(t), "--namespace", namespace}, tc.set...)
			_, errOut, err := helm(t, nil, args...)
			if err == nil {
				t.Fatalf("helm template %v succeeded, want a schema error", tc.set)
			}
			if !strings.Contains(errOut, "values don't meet the specifications of the schema") || !strings.Contains(errOut, tc.want) {
				t.Fatalf("error does not name %q as a schema violation:\n%s", tc.want, errOut)
			}
		})
	}
}

func TestChartPassesHelmLint(t *testing.T) {
	for _, set := range [][]string{nil, {"--set", "certManager.enabled=true"}, {"--set", "webhook.enabled=false"}} {
		t.Run("helm lint --strict passes with "+strings.Join(set, " "), func(t *testing.T) {
			out := mustHelm(t, nil, append([]string{"lint", "--strict", chartDir(t)}, set...)...)
			if !strings.Contains(out, "0 chart(s) failed") {
				t.Fatalf("helm lint:\n%s", out)
			}
		})
	}
}

func TestChartCRDsAreTheGeneratedOnes(t *testing.T) {
	root := repoRoot(t)
	bases, _ := filepath.Glob(filepath.Join(root, "config", "crd", "bases", "*.yaml"))
	inChart, _ := filepath.Glob(filepath.Join(chartDir(t), "crds", "*.yaml"))
	if len(bases) == 0 || len(bases) != len(inChart) {
		t.Fatalf("config/crd/bases has %d CRD files, the chart's crds/ %d: run make generate", len(bases), len(inChart))
	}
	for _, b := range bases {
		want, _ := os.ReadFile(b)
		got, err := os.ReadFile(filepath.Join(chartDir(t), "crds", filepath.Base(b)))
		if err != nil || !bytes.HasSuffix(got, want) {
			t.Errorf("charts/ferrofed/crds/%s is not config/crd/bases/%s: run make generate", filepath.Base(b), filepath.Base(b))
		}
	}
}

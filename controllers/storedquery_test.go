package controllers

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	ferrofedv1alpha1 "github.com/ferrofed/ferrofed/api/v1alpha1"
	"github.com/ferrofed/ferrofed/internal/gatewayspec"
	"github.com/ferrofed/ferrofed/test/doubles/issuer"
)

func storedQuery(name, gateway, definition string) ferrofedv1alpha1.StoredQuery {
	return ferrofedv1alpha1.StoredQuery{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "clinical"},
		Spec:       ferrofedv1alpha1.StoredQuerySpec{GatewayName: gateway, Definition: definition},
	}
}

const sqDefinition = `{"resourceType":"OperationDefinition","id":"high-risk","kind":"query","code":"high-risk","resource":["Observation"]}`

// The stored-query ConfigMap and the Deployment of a Gateway with [stored_queries]:
// testdata/stored-queries.yaml.
func TestGoldenStoredQueries(t *testing.T) {
	gw := gateway(func(g *ferrofedv1alpha1.Gateway) {
		g.Spec.Config = configWithIssuer("[stored_queries]\ndrift_interval_ms = 60000\n")
	})
	rendered, err := gatewayspec.RenderAndCheck(&gw.Spec, gatewayspec.Plan(&gw.Spec), []byte(*gw.Spec.Config.Inline))
	if err != nil {
		t.Fatal(err)
	}
	cm, left := StoredQueriesConfigMap(gw, []ferrofedv1alpha1.StoredQuery{
		storedQuery("b-second", "edge", strings.Replace(sqDefinition, "high-risk", "second", 2)),
		storedQuery("a-first", "edge", sqDefinition),
	})
	if len(left) != 0 {
		t.Fatalf("left out %v", left)
	}
	var out bytes.Buffer
	for _, obj := range []any{ConfigMap(gw, rendered, ""), cm, Deployment(gw, gatewayspec.Plan(&gw.Spec), rendered)} {
		data, err := yaml.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		out.WriteString("---\n")
		out.Write(data)
	}
	golden := filepath.Join("testdata", "stored-queries.yaml")
	if *update {
		if err := os.WriteFile(golden, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("read %s (run with -update to create it): %v", golden, err)
	}
	if !bytes.Equal(want, out.Bytes()) {
		t.Errorf("%s differs from the builders' output; rerun with -update and review the diff:\n%s", golden, out.String())
	}
}

func TestStoredQueriesConfigMapLeavesOutWhatTheStoreCannotHold(t *testing.T) {
	gw := gateway(nil)
	big := `{"id":"big","pad":"` + strings.Repeat("x", MaxStoredQueriesBytes) + `"}`
	tests := []struct {
		name     string
		sqs      []ferrofedv1alpha1.StoredQuery
		keys     []string
		leftOut  []string
		reasonOf string
	}{
		{"no StoredQuery: an empty ConfigMap", nil, nil, nil, ""},
		{"one key per definition id", []ferrofedv1alpha1.StoredQuery{storedQuery("x", "edge", sqDefinition)}, []string{"high-risk.json"}, nil, ""},
		{"a definition that is not JSON is left out", []ferrofedv1alpha1.StoredQuery{storedQuery("x", "edge", "{")}, nil, []string{"x"}, "FHIR id"},
		{"an id that is a path is left out", []ferrofedv1alpha1.StoredQuery{storedQuery("x", "edge", `{"id":"../etc"}`)}, nil, []string{"x"}, "FHIR id"},
		{"an id that would be a dot file is left out", []ferrofedv1alpha1.StoredQuery{storedQuery("x", "edge", `{"id":".."}`)}, nil, []string{"x"}, "FHIR id"},
		{"the second StoredQuery (by name) of an id is left out", []ferrofedv1alpha1.StoredQuery{storedQuery("z", "edge", sqDefinition), storedQuery("a", "edge", sqDefinition)}, []string{"high-risk.json"}, []string{"z"}, "has the id"},
		{"a definition past the ConfigMap's room is left out", []ferrofedv1alpha1.StoredQuery{storedQuery("a", "edge", sqDefinition), storedQuery("b", "edge", big)}, []string{"high-risk.json"}, []string{"b"}, "bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cm, left := StoredQueriesConfigMap(gw, tt.sqs)
			if *cm.Name != "edge-stored-queries" || *cm.Namespace != "clinical" || len(cm.OwnerReferences) != 1 || !*cm.OwnerReferences[0].Controller {
				t.Fatalf("not the Gateway's ConfigMap: %+v", cm.ObjectMetaApplyConfiguration)
			}
			var keys []string
			for k := range cm.Data {
				keys = append(keys, k)
			}
			if strings.Join(keys, ",") != strings.Join(tt.keys, ",") {
				t.Errorf("keys %v, want %v", keys, tt.keys)
			}
			var names []string
			for _, l := range left {
				names = append(names, l.Name)
				if !strings.Contains(l.Reason, tt.reasonOf) {
					t.Errorf("reason %q does not say %q", l.Reason, tt.reasonOf)
				}
			}
			if strings.Join(names, ",") != strings.Join(tt.leftOut, ",") {
				t.Errorf("left out %v, want %v", names, tt.leftOut)
			}
		})
	}
}

func TestStoredQueriesMountFollowsTheTable(t *testing.T) {
	for _, tc := range []struct {
		name, inline string
		mounted      bool
	}{
		{"without [stored_queries]: no mount, no store", "", false},
		{"with [stored_queries]: the ConfigMap read-only at stored_queries.dir", "[stored_queries]\n", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dep, rendered := renderedDeployment(t, gateway(func(g *ferrofedv1alpha1.Gateway) {
				g.Spec.Config = configWithIssuer(tc.inline)
			}))
			mounted := false
			for _, m := range dep.Spec.Template.Spec.Containers[0].VolumeMounts {
				mounted = mounted || (m.Name == "stored-queries" && m.MountPath == gatewayspec.StoredQueriesDir && m.ReadOnly)
			}
			var volume bool
			for _, v := range dep.Spec.Template.Spec.Volumes {
				volume = volume || (v.ConfigMap != nil && v.ConfigMap.Name == "edge-stored-queries" && v.ConfigMap.Optional != nil && *v.ConfigMap.Optional)
			}
			dir := strings.Contains(string(rendered), "dir = '"+gatewayspec.StoredQueriesDir+"'")
			if mounted != tc.mounted || volume != tc.mounted || dir != tc.mounted {
				t.Fatalf("mounted %v, volume %v, dir rendered %v; want %v:\n%s", mounted, volume, dir, tc.mounted, rendered)
			}
		})
	}
	t.Run("stored_queries.dir set by the user is refused, naming the resource", func(t *testing.T) {
		gw := gateway(nil)
		_, err := gatewayspec.RenderAndCheck(&gw.Spec, gatewayspec.Plan(&gw.Spec), []byte(issuer.WithRemote("[stored_queries]\ndir = '/tmp/x'\n")))
		if err == nil || !strings.Contains(err.Error(), "stored_queries.dir") || !strings.Contains(err.Error(), "StoredQuery") {
			t.Fatalf("%v", err)
		}
	})
}

func TestRenderedCondition(t *testing.T) {
	sq := storedQuery("high-risk", "edge", sqDefinition)
	sq.Generation = 3
	tests := []struct {
		name         string
		gatewayFound bool
		leftOut      string
		status       metav1.ConditionStatus
		reason, says string
	}{
		{"rendered: True, naming the ConfigMap", true, "", metav1.ConditionTrue, ferrofedv1alpha1.ReasonRendered, "edge-stored-queries"},
		{"left out: False with the reason", true, "another StoredQuery of the Gateway has the id", metav1.ConditionFalse, ferrofedv1alpha1.ReasonStoredQueryLeftOut, "has the id"},
		{"no Gateway: False naming spec.gatewayName", false, "", metav1.ConditionFalse, ferrofedv1alpha1.ReasonGatewayNotFound, `spec.gatewayName: no Gateway "edge"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := renderedCondition(&sq, tt.gatewayFound, tt.leftOut)
			if c.Type != ferrofedv1alpha1.ConditionRendered || c.Status != tt.status || c.Reason != tt.reason || !strings.Contains(c.Message, tt.says) || c.ObservedGeneration != 3 {
				t.Fatalf("%+v", c)
			}
		})
	}
}

package storedquery_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/ferrofed/ferrofed/gateway/assemble"
	"github.com/ferrofed/ferrofed/gateway/storedquery"
	"github.com/ferrofed/ferrofed/test/doubles/issuer"
	"github.com/ferrofed/ferrofed/test/doubles/members"
	"github.com/ferrofed/ferrofed/test/gatewaytest"
)

// gateway is a real gateway on loopback with the federation surface and the stored
// queries over the members given; noScope is an operator token without the scope.
type gateway struct {
	*gatewaytest.Gateway
	noScope string
	queries *storedquery.Queries
}

// tables are the members' and the store's tables, with a drift interval of 1 s.
func tables(dir string, ms []*members.Server) string {
	doc := fmt.Sprintf("[stored_queries]\ndir = %q\ndrift_interval_ms = 1000\n", dir)
	for _, m := range ms {
		doc += fmt.Sprintf("[[registry.members]]\nid = %q\nquery_endpoint = %q\n", m.Opts.ID, m.URL)
	}
	return doc
}

// startGateway starts a gateway, as assemble builds it, over ms (member ids are their
// Opts.ID) with the store dir, trusting is.
func startGateway(t testing.TB, is *issuer.Issuer, dir string, ms ...*members.Server) *gateway {
	t.Helper()
	g := gatewaytest.Start(t, tables(dir, ms), gatewaytest.WithIssuer(is))
	return &gateway{Gateway: g, noScope: is.Sign(t, "bob", "other"), queries: g.Assembled.Queries()}
}

// startAudited is startGateway with the tables extra and what the test injects
// into the production wiring: a recorder that refuses records (a full spool), or a
// spool file system that fails (assemble.WithAuditOptions).
func startAudited(t testing.TB, is *issuer.Issuer, dir, extra string, inject assemble.Option, ms ...*members.Server) *gateway {
	t.Helper()
	g := gatewaytest.Start(t, tables(dir, ms)+extra, gatewaytest.WithIssuer(is), gatewaytest.WithAssemble(inject))
	return &gateway{Gateway: g, noScope: is.Sign(t, "bob", "other"), queries: g.Assembled.Queries()}
}

// definition is a stored query of id and code over Observation, with the template
// given.
func definition(id, code, template string) []byte {
	b, _ := json.Marshal(map[string]any{
		"resourceType": "OperationDefinition",
		"id":           id,
		"url":          "https://example.org/fhir/OperationDefinition/" + id,
		"version":      "1",
		"name":         "StoredQuery",
		"status":       "active",
		"kind":         "query",
		"code":         code,
		"system":       false,
		"type":         true,
		"instance":     false,
		"resource":     []string{"Observation"},
		"parameter": []map[string]any{
			{"name": "patient", "use": "in", "min": 1, "max": "1", "type": "string"},
			{"name": "code", "use": "in", "min": 0, "max": "1", "type": "string"},
		},
		"extension": []map[string]any{{
			"url": storedquery.TemplateExtension,
			"valueExpression": map[string]any{
				"language":   storedquery.TemplateLanguage,
				"expression": template,
			},
		}},
	})
	return b
}

const highRisk = "Observation?subject=Patient/{{%patient}}&code={{%code}}&status=final"

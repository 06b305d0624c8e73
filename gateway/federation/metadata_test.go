package federation_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/ferrofed/ferrofed/gateway/fhir"
	"github.com/ferrofed/ferrofed/test/double"
	"github.com/ferrofed/ferrofed/test/doubles/members"
)

type capabilityAnswer struct {
	ResourceType   string            `json:"resourceType"`
	Kind           string            `json:"kind"`
	FHIRVersion    string            `json:"fhirVersion"`
	Format         []string          `json:"format"`
	Implementation map[string]string `json:"implementation"`
	Rest           []struct {
		Mode     string `json:"mode"`
		Resource []struct {
			Type        string             `json:"type"`
			SearchParam []fhir.SearchParam `json:"searchParam"`
		} `json:"resource"`
	} `json:"rest"`
}

func (h *harness) metadata() capabilityAnswer {
	h.t.Helper()
	res, body := h.get("/fhir/metadata")
	var c capabilityAnswer
	if err := json.Unmarshal(body, &c); err != nil || res.StatusCode != 200 {
		h.t.Fatalf("metadata: %d %s", res.StatusCode, body)
	}
	return c
}

func (h *harness) metadataRequests() map[string]int {
	out := map[string]int{}
	for id, m := range h.members {
		for _, r := range m.Log() {
			if r.Path == "/fhir/metadata" {
				out[id]++
			}
		}
	}
	return out
}

func TestTheGatewaysCapabilityStatementIsWhatTheMembersHaveInCommon(t *testing.T) {
	h := newHarness(t, harnessOptions{},
		node{id: "node-a"},
		node{id: "node-b", opts: members.Options{ResourceTypes: []string{"Patient", "Encounter"}, OmitSearchParams: []string{"gender"}}},
		node{id: "node-down", opts: members.Options{Knobs: double.Knobs{Status: 500}}})
	h.wantStates(map[string]string{"node-a-query": "unknown", "node-b-query": "unknown", "node-down-query": "unknown"})
	c := h.metadata()
	if c.ResourceType != "CapabilityStatement" || c.Kind != "instance" || c.FHIRVersion != "4.0.1" || !slices.Contains(c.Format, "json") ||
		c.Implementation["url"] != h.URL+"/fhir" || len(c.Rest) != 1 || c.Rest[0].Mode != "server" {
		t.Fatalf("statement %+v", c)
	}
	var types []string
	params := map[string]string{}
	for _, r := range c.Rest[0].Resource {
		types = append(types, r.Type)
		if r.Type == "Patient" {
			for _, p := range r.SearchParam {
				params[p.Name] = p.Type
			}
		}
	}
	if strings.Join(types, ",") != "Encounter,Patient" {
		t.Fatalf("types %v, want the two both members serve", types)
	}
	if params["family"] != "string" || params["birthdate"] != "date" || params["_id"] != "token" {
		t.Fatalf("Patient's parameters %v", params)
	}
	if _, ok := params["gender"]; ok {
		t.Fatal("gender is listed though node-b does not know it")
	}
	// Each member was asked once, and each call recorded its state.
	if got := h.metadataRequests(); got["node-a"] != 1 || got["node-b"] != 1 || got["node-down"] != 1 {
		t.Fatalf("metadata requests %v", got)
	}
	h.wantStates(map[string]string{"node-a-query": "up", "node-b-query": "up", "node-down-query": "failing"})
	// Within the TTL the statement is the cached one: no member is asked again.
	h.metadata()
	if got := h.metadataRequests(); got["node-a"] != 1 {
		t.Fatalf("the cached statement asked again: %v", got)
	}
}

func TestTheProbeRefreshesTheStatementAndAZeroTTLAsksEveryTime(t *testing.T) {
	h := newHarness(t, harnessOptions{}, node{id: "node-a"}, node{id: "node-b", opts: members.Options{ResourceTypes: []string{"Observation"}}})
	res, _, err := h.do(context.Background(), http.MethodPost, "/operator/probe", "Bearer "+h.Token, nil)
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("probe %v %v", res, err)
	}
	c := h.metadata()
	if got := h.metadataRequests(); got["node-a"] != 1 || got["node-b"] != 1 {
		t.Fatalf("after a probe the metadata asked again: %v", got)
	}
	if len(c.Rest[0].Resource) != 1 || c.Rest[0].Resource[0].Type != "Observation" {
		t.Fatalf("statement %+v", c.Rest)
	}

	every := newHarness(t, harnessOptions{federation: "capability_ttl_ms = 0"}, node{id: "node-a"})
	every.metadata()
	every.metadata()
	if got := every.metadataRequests(); got["node-a"] != 2 {
		t.Fatalf("with capability_ttl_ms = 0: %v", got)
	}
}

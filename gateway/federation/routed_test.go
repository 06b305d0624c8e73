package federation_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ferrofed/ferrofed/gateway/fhir"
	"github.com/ferrofed/ferrofed/test/doubles/members"
)

func TestARoutedMemberBuildsTheGatewaysURLsFromTheForwardedHeaders(t *testing.T) {
	h := newHarness(t, harnessOptions{}, node{id: "node-a", opts: members.Options{Entries: 25, NumericIDs: true}})
	header := http.Header{"X-Forwarded-Host": {"evil.example"}, "Forwarded": {"host=evil.example"}}
	res, body, err := h.do(context.Background(), http.MethodGet, "/nodes/node-a/fhir/Patient", "", header)
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("%v %v %s", res, err, body)
	}
	got := h.members["node-a"].LastRequest().Header
	host := strings.TrimSuffix(strings.TrimPrefix(h.URL, "http://"), testBase)
	if got.Get("X-Forwarded-Proto") != "http" || got.Get("X-Forwarded-Host") != host || got.Get("X-Forwarded-Prefix") != testBase+"/nodes/node-a/fhir" ||
		got.Get("Forwarded") != `for=127.0.0.1;proto=http;host="`+host+`"` || got.Get("X-Forwarded-For") != "127.0.0.1" || len(got.Values("Forwarded")) != 1 {
		t.Fatalf("the member was sent %v", got)
	}
	var b searchAnswer
	if err := json.Unmarshal(body, &b); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	routed := h.URL + "/nodes/node-a/fhir"
	if !strings.HasPrefix(b.link("next"), routed+"/Patient?") || b.Entry[0].FullURL != routed+"/Patient/1" {
		t.Fatalf("links %+v, fullUrl %s", b.Link, b.Entry[0].FullURL)
	}
	h.assertNoMemberAddress(body)
	// Paging stays on the gateway.
	_, rest, _ := strings.Cut(b.link("next"), testBase)
	res, body = h.get(rest)
	if err := json.Unmarshal(body, &b); err != nil {
		t.Fatalf("the routed next page: %v: %s", err, body)
	}
	if res.StatusCode != 200 || b.Entry[0].Resource.ID != "21" || b.link("next") != "" {
		t.Fatalf("the routed next page: %d %s", res.StatusCode, body)
	}

	created, err := h.send(context.Background(), http.MethodPost, "/nodes/node-a/fhir/Patient", strings.NewReader(`{"resourceType":"Patient"}`),
		http.Header{"Content-Type": {fhir.MediaType}})
	if err != nil {
		t.Fatal(err)
	}
	created.Body.Close()
	if created.StatusCode != 201 || created.Header.Get("Location") != routed+"/Patient/new-1/_history/1" {
		t.Fatalf("create: %d Location %q", created.StatusCode, created.Header.Get("Location"))
	}
}

func TestARoutedAnswerUnderTheMembersOwnBaseIsRewritten(t *testing.T) {
	var self string // the member's base, known once it listens
	member := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", fhir.MediaType)
		w.Header().Set("Location", self+"/Patient/9/_history/1")
		w.Header().Set("Content-Location", self+"/Patient/9")
		body := fmt.Sprintf(`{"resourceType":"Bundle","type":"searchset","link":[{"relation":"next","url":"%s/Patient?page=2"}],"entry":[{"fullUrl":"%s/Patient/9","resource":{"resourceType":"Patient","id":"9"}}]}`, self, self)
		if r.URL.Query().Get("stream") == "" {
			w.Header().Set("Content-Length", fmt.Sprint(len(body)))
			_, _ = io.WriteString(w, body)
			return
		}
		// Streamed, the member's base split across two writes.
		cut := strings.Index(body, self) + len(self)/2
		_, _ = io.WriteString(w, body[:cut])
		w.(http.Flusher).Flush()
		_, _ = io.WriteString(w, body[cut:])
	}))
	defer member.Close()
	self = member.URL + "/fhir"
	h := newHarness(t, harnessOptions{}, node{id: "node-x", url: self})
	routed := h.URL + "/nodes/node-x/fhir"
	for _, q := range []string{"", "?stream=1"} {
		res, body, err := h.do(context.Background(), http.MethodGet, "/nodes/node-x/fhir/Patient"+q, "", nil)
		if err != nil || res.StatusCode != 200 {
			t.Fatalf("%v %v", res, err)
		}
		if strings.Contains(string(body), member.URL) || strings.Count(string(body), routed+"/Patient") != 2 {
			t.Fatalf("%s: body %s", q, body)
		}
		if res.Header.Get("Location") != routed+"/Patient/9/_history/1" || res.Header.Get("Content-Location") != routed+"/Patient/9" {
			t.Fatalf("%s: headers %v", q, res.Header)
		}
		if q == "" && res.ContentLength != int64(len(body)) {
			t.Fatalf("the rewritten answer says %d bytes, has %d", res.ContentLength, len(body))
		}
	}
}

func TestAFederatedEntryNeverCarriesTheMembersAddress(t *testing.T) {
	var self string
	member := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", fhir.MediaType)
		fmt.Fprintf(w, `{"resourceType":"Bundle","type":"searchset","total":1,"link":[{"relation":"self","url":"%s/Observation"}],`+
			`"entry":[{"fullUrl":"%s/Observation/o1","resource":{"resourceType":"Observation","id":"o1","status":"final","code":{"text":"x"},"subject":{"reference":"%s/Patient/p1"}},`+
			`"request":{"method":"GET","url":"%s/Observation/o1"},"response":{"status":"200","location":"%s/Observation/o1"}}]}`, self, self, self, self, self)
	}))
	defer member.Close()
	self = member.URL + "/fhir"
	h := newHarness(t, harnessOptions{}, node{id: "node-x", url: self})
	_, body := h.get("/fhir/Observation")
	// The absolute reference to the member's own base is the federated reference.
	if strings.Contains(string(body), member.URL) || !strings.Contains(string(body), `"reference":"Patient/node-x.p1"`) ||
		!strings.Contains(string(body), `"fullUrl":"`+h.URL+`/fhir/Observation/node-x.o1"`) || strings.Contains(string(body), `"request"`) {
		t.Fatalf("%s", body)
	}
}

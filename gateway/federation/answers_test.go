package federation_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"

	"github.com/ferrofed/ferrofed/gateway/federation"
	"github.com/ferrofed/ferrofed/gateway/fhir"
	"github.com/ferrofed/ferrofed/test/doubles/members/fhirschema"
)

// reply is what a test reads of the gateway's answer besides its body. The helpers
// that send a request read and close the body where they obtain the response, and
// hand back a reply instead of the *http.Response.
type reply struct {
	StatusCode    int
	Header        http.Header
	ContentLength int64
}

func replyOf(res *http.Response) *reply {
	return &reply{StatusCode: res.StatusCode, Header: res.Header, ContentLength: res.ContentLength}
}

// send sends a request of path (under the base) to the gateway, body nil for none,
// and returns the answer unread. Every request of the harness goes through it, to
// gatewaytest's one place (Gateway.Send, which gives a data-plane request the
// client token).
func (h *harness) send(ctx context.Context, method, path string, body io.Reader, header http.Header) (*http.Response, error) {
	h.t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, h.URL+path, body)
	if err != nil {
		h.t.Fatal(err)
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	return h.Send(req)
}

// do sends a request to the gateway; authorization is the whole header value, "" for none.
func (h *harness) do(ctx context.Context, method, path, authorization string, header http.Header) (*reply, []byte, error) {
	h.t.Helper()
	if authorization != "" {
		header = header.Clone()
		if header == nil {
			header = http.Header{}
		}
		header.Set("Authorization", authorization)
	}
	res, err := h.send(ctx, method, path, nil, header)
	if err != nil {
		return nil, nil, err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err == nil {
		h.checkR4(method+" "+path, res, body)
	}
	return replyOf(res), body, err
}

// checkR4 validates every FHIR JSON answer of the gateway against HL7's R4 JSON
// schema: with strict_fhir it must be valid R4; without it the one problem allowed is
// meta.federation (docs/data-plane.md, "A federated search").
func (h *harness) checkR4(what string, res *http.Response, body []byte) {
	h.t.Helper()
	if res.Header.Get("Content-Type") != fhir.MediaType || len(body) == 0 || body[0] != '{' {
		return
	}
	if !strings.Contains(string(body[:min(len(body), 64)]), `"resourceType"`) {
		return
	}
	validate := fhirschema.ValidateFederated
	if h.strict {
		validate = fhirschema.Validate
	}
	if err := validate(body); err != nil {
		h.t.Errorf("%s answered %d, not valid R4: %v\n%.2000s", what, res.StatusCode, err, body)
	}
}

func (h *harness) get(path string) (*reply, []byte) {
	h.t.Helper()
	res, body, err := h.do(context.Background(), http.MethodGet, path, "", nil)
	if err != nil {
		h.t.Fatalf("GET %s: %v", path, err)
	}
	return res, body
}

// report reads the dependency report with the operator token; it returns the raw body
// too, for the assertions on what it must never contain.
func (h *harness) report() (map[string]string, []byte) {
	h.t.Helper()
	res, body, err := h.do(context.Background(), http.MethodGet, "/operator/dependencies", "Bearer "+h.Token, nil)
	if err != nil || res.StatusCode != 200 {
		h.t.Fatalf("dependency report: %v %v %s", res, err, body)
	}
	var r struct {
		Endpoints map[string]string `json:"endpoints"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		h.t.Fatal(err)
	}
	return r.Endpoints, body
}

func (h *harness) wantStates(want map[string]string) []byte {
	h.t.Helper()
	got, raw := h.report()
	if len(got) != len(want) {
		h.t.Fatalf("report %s, want %v", raw, want)
	}
	for id, s := range want {
		if got[id] != s {
			h.t.Fatalf("report %s, want %v", raw, want)
		}
	}
	return raw
}

// searchAnswer is the federated Bundle as a client reads it.
type searchAnswer struct {
	ResourceType string `json:"resourceType"`
	Type         string `json:"type"`
	Meta         struct {
		Federation []federation.Record `json:"federation"`
		Extension  []map[string]any    `json:"extension"`
	} `json:"meta"`
	Total *int        `json:"total"`
	Link  []fhir.Link `json:"link"`
	Entry []struct {
		FullURL  string `json:"fullUrl"`
		Resource struct {
			ResourceType string `json:"resourceType"`
			ID           string `json:"id"`
			BirthDate    string `json:"birthDate"`
			Meta         struct {
				LastUpdated string `json:"lastUpdated"`
			} `json:"meta"`
			Name []struct {
				Family string `json:"family"`
			} `json:"name"`
			Issue []fhir.Issue `json:"issue"`
		} `json:"resource"`
		Search struct {
			Mode string `json:"mode"`
		} `json:"search"`
	} `json:"entry"`
}

func (b searchAnswer) matches() int {
	n := 0
	for _, e := range b.Entry {
		if e.Search.Mode == "match" {
			n++
		}
	}
	return n
}

func (b searchAnswer) link(relation string) string {
	for _, l := range b.Link {
		if l.Relation == relation {
			return l.URL
		}
	}
	return ""
}

// postForm POSTs body with its content type to the gateway.
func (h *harness) postForm(path, body, contentType string) (*reply, []byte) {
	h.t.Helper()
	res, err := h.send(context.Background(), http.MethodPost, path, strings.NewReader(body), http.Header{"Content-Type": {contentType}})
	if err != nil {
		h.t.Fatalf("POST %s: %v", path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		h.t.Fatal(err)
	}
	h.checkR4("POST "+path, res, b)
	return replyOf(res), b
}

package federation_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ferrofed/ferrofed/gateway/fhir"
	"github.com/ferrofed/ferrofed/test/double"
	"github.com/ferrofed/ferrofed/test/doubles/members"
	"github.com/ferrofed/ferrofed/test/doubles/members/fhirschema"
)

// routedAnswer is what a client received of a routed request: the status, the
// headers and the body as the client reads it (decompressed when the gateway
// compressed it), and whether it was compressed.
type routedAnswer struct {
	status  int
	header  http.Header
	body    []byte
	gzipped bool
}

// routed sends method path (with body, a FHIR JSON resource, when not "") to the
// gateway asking for gzip (Accept-Encoding: gzip) or not (identity), and reads what
// the client receives. Go's client does not decompress an answer to a request that
// names its own Accept-Encoding: the bytes read are the bytes sent.
func (h *harness) routed(method, path, body string, gz bool, header http.Header) routedAnswer {
	h.t.Helper()
	header = header.Clone()
	if header == nil {
		header = http.Header{}
	}
	header.Set("Accept-Encoding", "identity")
	if gz {
		header.Set("Accept-Encoding", "gzip")
	}
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
		header.Set("Content-Type", fhir.MediaType)
	}
	res, err := h.send(context.Background(), method, path, rd, header)
	if err != nil {
		h.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		h.t.Fatalf("%s %s: reading the answer: %v", method, path, err)
	}
	a := routedAnswer{status: res.StatusCode, header: res.Header, body: raw}
	switch ce := res.Header.Get("Content-Encoding"); {
	case ce == "gzip" && gz:
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			h.t.Fatalf("%s %s: the gzip answer does not decode: %v", method, path, err)
		}
		if a.body, err = io.ReadAll(zr); err != nil {
			h.t.Fatalf("%s %s: the gzip answer does not decode: %v", method, path, err)
		}
		a.gzipped = true
	case ce != "":
		h.t.Fatalf("%s %s (gzip %v): answered in Content-Encoding %q", method, path, gz, ce)
	}
	// Every FHIR answer is R4 (docs/data-plane.md, "Routes").
	h.checkR4(fmt.Sprintf("%s %s (gzip %v)", method, path, gz), res, a.body)
	// No member address in what the client sees, decompressed, nor in its headers.
	h.assertNoMemberAddress(raw)
	h.assertNoMemberAddress(a.body)
	for k, vs := range res.Header {
		h.assertNoMemberAddress([]byte(k + ": " + strings.Join(vs, ", ")))
	}
	return a
}

// TestNoRoutedAnswerCarriesAMembersAddress sends every kind of routed request (read,
// search with a next link, create with Location, error) with and without
// Accept-Encoding: gzip to members that build their URLs on their own base: one that
// gzips when asked, one that gzips whatever it is asked. The client never sees a
// member's address, compressed or not, and a client that asks for gzip gets a larger
// JSON answer gzipped.
func TestNoRoutedAnswerCarriesAMembersAddress(t *testing.T) {
	h := newHarness(t, harnessOptions{},
		node{id: "node-a", opts: members.Options{Entries: 25, NumericIDs: true, Encoding: members.Encoding{Gzip: true, OwnBase: true}}},
		node{id: "node-b", opts: members.Options{Entries: 25, NumericIDs: true, Encoding: members.Encoding{ForceEncoding: "gzip", OwnBase: true}}})
	for _, id := range []string{"node-a", "node-b"} {
		routed := h.URL + "/nodes/" + id + "/fhir"
		for _, gz := range []bool{false, true} {
			name := fmt.Sprintf("%s gzip=%v", id, gz)
			a := h.routed(http.MethodGet, "/nodes/"+id+"/fhir/Patient/3", "", gz, nil)
			if a.status != 200 || !strings.Contains(string(a.body), `"id":"3"`) {
				t.Fatalf("%s read: %d %s", name, a.status, a.body)
			}
			a = h.routed(http.MethodGet, "/nodes/"+id+"/fhir/Patient", "", gz, nil)
			var b searchAnswer
			if err := json.Unmarshal(a.body, &b); err != nil || a.status != 200 {
				t.Fatalf("%s search: %d %v %s", name, a.status, err, a.body)
			}
			if !strings.HasPrefix(b.link("next"), routed+"/Patient?") || b.Entry[0].FullURL != routed+"/Patient/1" {
				t.Fatalf("%s search: links %+v, fullUrl %s", name, b.Link, b.Entry[0].FullURL)
			}
			// A searchset of 20 entries is several KiB: gzipped for a client that asks.
			if a.gzipped != gz || !strings.Contains(a.header.Get("Vary"), "Accept-Encoding") {
				t.Fatalf("%s search: gzipped %v, Vary %q", name, a.gzipped, a.header.Get("Vary"))
			}
			_, next, _ := strings.Cut(b.link("next"), testBase)
			a = h.routed(http.MethodGet, next, "", gz, nil)
			if err := json.Unmarshal(a.body, &b); err != nil || a.status != 200 || len(b.Entry) != 5 || b.Entry[0].FullURL != routed+"/Patient/21" {
				t.Fatalf("%s next page: %d %v %s", name, a.status, err, a.body)
			}
			a = h.routed(http.MethodPost, "/nodes/"+id+"/fhir/Patient", `{"resourceType":"Patient"}`, gz, nil)
			if a.status != 201 || !strings.HasPrefix(a.header.Get("Location"), routed+"/Patient/new-") ||
				a.header.Get("Content-Location") != a.header.Get("Location") {
				t.Fatalf("%s create: %d %v", name, a.status, a.header)
			}
			// The member's own 404 (an OperationOutcome, compressed by the member).
			a = h.routed(http.MethodGet, "/nodes/"+id+"/fhir/Medication", "", gz, nil)
			if oo := outcomeOf(t, a.body); a.status != 404 || !strings.Contains(oo.Issue[0].Diagnostics, "unknown resource type") {
				t.Fatalf("%s error: %d %s", name, a.status, a.body)
			}
		}
	}
	// The members were asked for identity (node-b answered gzip all the same).
	for _, id := range []string{"node-a", "node-b"} {
		if got := h.members[id].LastRequest().Header.Values("Accept-Encoding"); len(got) != 1 || got[0] != "identity" {
			t.Errorf("%s was sent Accept-Encoding %q", id, got)
		}
	}
}

// bigMember is a member that answers a search with a searchset of about size bytes
// whose fullUrls are on its own base, gzipped at level when the request allows gzip,
// as a production server does; cut cuts the document off in its middle (the HTTP
// body whole). Its answer is of unknown length (chunked).
func bigMember(tb testing.TB, size, level int, cut bool) (base string) {
	var page []byte
	member := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", fhir.MediaType)
		var out io.Writer = w
		if strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
			w.Header().Set("Content-Encoding", "gzip")
			zw, _ := gzip.NewWriterLevel(w, level)
			defer zw.Close()
			out = zw
		}
		_, _ = out.Write(page)
	}))
	tb.Cleanup(member.Close)
	base = member.URL + "/fhir"
	var b strings.Builder
	fmt.Fprintf(&b, `{"resourceType":"Bundle","type":"searchset","link":[{"relation":"self","url":"%s/Patient"}],"entry":[`, base)
	for i := 0; b.Len() < size; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"fullUrl":"%s/Patient/p-%d","resource":{"resourceType":"Patient","id":"p-%d","meta":{"lastUpdated":"2026-01-01T00:00:00Z"},`+
			`"name":[{"family":"Family-%d","given":["Given-%d"]}],"birthDate":"1970-01-01","gender":"unknown","link":[{"other":{"reference":"%s/Patient/q-%d"},"type":"seealso"}]},"search":{"mode":"match"}}`,
			base, i, i, i, i, base, i)
	}
	b.WriteString("]}")
	page = []byte(b.String())
	if cut {
		page = page[:len(page)/2]
	}
	return base
}

// TestALargeRoutedAnswerIsRewrittenAndGzippedAsItStreams: an answer of unknown length
// (the streaming rewriter) of about 1 MiB, gzipped by the member when asked: the
// client reads it whole, every fullUrl the gateway's, no member address, gzipped when
// it asked.
func TestALargeRoutedAnswerIsRewrittenAndGzippedAsItStreams(t *testing.T) {
	base := bigMember(t, 1<<20, gzip.DefaultCompression, false)
	h := newHarness(t, harnessOptions{}, node{id: "node-x", url: base})
	for _, gz := range []bool{false, true} {
		a := h.routed(http.MethodGet, "/nodes/node-x/fhir/Patient", "", gz, nil)
		var b searchAnswer
		if err := json.Unmarshal(a.body, &b); err != nil || a.status != 200 || a.gzipped != gz {
			t.Fatalf("gzip=%v: %d %v gzipped %v", gz, a.status, err, a.gzipped)
		}
		routed := h.URL + "/nodes/node-x/fhir"
		if len(b.Entry) < 1000 || b.Entry[999].FullURL != routed+"/Patient/p-999" || strings.Count(string(a.body), routed) != 2*len(b.Entry)+1 {
			t.Fatalf("gzip=%v: %d entries, the 1000th %q", gz, len(b.Entry), b.Entry[999].FullURL)
		}
	}
}

// TestARoutedAnswerTheGatewayCannotDecodeIsA502: a member that answers in a coding
// the gateway does not decode (br), or a gzip stream that does not decode, or one
// past registry.max_member_body_bytes once decoded: a 502 OperationOutcome naming
// the member (and the limit), never the member's bytes.
func TestARoutedAnswerTheGatewayCannotDecodeIsA502(t *testing.T) {
	for _, c := range []struct {
		name    string
		encode  string
		maxBody int64
		want    string
	}{
		{"br", "br", 0, `member node-a answered HTTP 200 with a body in Content-Encoding "br", which the gateway does not decode`},
		{"corrupt gzip", "gzip-corrupt", 0, `member node-a answered HTTP 200 with a body in Content-Encoding "gzip", which the gateway does not decode`},
		{"past the body limit", "gzip", 4096, "member node-a answered HTTP 200 with a body longer than registry.max_member_body_bytes (4096 bytes) once decoded"},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, harnessOptions{maxBody: c.maxBody},
				node{id: "node-a", opts: members.Options{Entries: 20, Encoding: members.Encoding{ForceEncoding: c.encode, OwnBase: true}}})
			for _, gz := range []bool{false, true} {
				a := h.routed(http.MethodGet, "/nodes/node-a/fhir/Patient", "", gz, nil)
				oo := outcomeOf(t, a.body)
				if a.status != 502 || a.gzipped || !strings.HasPrefix(oo.Issue[0].Diagnostics, c.want) || strings.Contains(string(a.body), "MEMBER-BODY") {
					t.Fatalf("gzip=%v: %d %s", gz, a.status, a.body)
				}
				if err := fhirschema.Validate(a.body); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// TestARoutedErrorThatIsNoFHIRIsTheGatewaysOutcome: a member's error page (HTML, plain
// text, a cut-off OperationOutcome), compressed or not, becomes the gateway's
// OperationOutcome: a 4xx keeps its status, a 5xx is a 502; the member's own text is
// not passed.
func TestARoutedErrorThatIsNoFHIRIsTheGatewaysOutcome(t *testing.T) {
	for _, c := range []struct {
		body           string
		status, want   int
		code, encoding string
	}{
		{"html", 500, 502, "transient", ""},
		{"html", 503, 502, "transient", "gzip"},
		{"text", 404, 404, "not-found", ""},
		{"text", 404, 404, "not-found", "gzip"},
		{"cut", 500, 502, "transient", ""},
		{"cut", 400, 400, "processing", "gzip"},
	} {
		t.Run(fmt.Sprintf("%s %d %s", c.body, c.status, c.encoding), func(t *testing.T) {
			h := newHarness(t, harnessOptions{}, node{id: "node-a", opts: members.Options{
				Diagnostics: secrets, Knobs: double.Knobs{Status: c.status}, Encoding: members.Encoding{ErrorBody: c.body, ForceEncoding: c.encoding}}})
			for _, gz := range []bool{false, true} {
				a := h.routed(http.MethodGet, "/nodes/node-a/fhir/Patient/1", "", gz, nil)
				oo := outcomeOf(t, a.body)
				if a.status != c.want || len(oo.Issue) != 1 || oo.Issue[0].Code != c.code ||
					oo.Issue[0].Diagnostics != fmt.Sprintf("member node-a answered HTTP %d", c.status) {
					t.Fatalf("gzip=%v: %d %s", gz, a.status, a.body)
				}
				if strings.Contains(string(a.body), "MEMBER-BODY") || a.header.Get("Content-Type") != fhir.MediaType {
					t.Fatalf("gzip=%v: the member's text was passed: %v %s", gz, a.header, a.body)
				}
				assertNoLeak(t, "the answer", a.body)
				if err := fhirschema.Validate(a.body); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// TestACutOffRoutedAnswerNeverPassesForAWholeOne: a 200 whose JSON document is cut
// off (the HTTP body itself whole) is a 502 OperationOutcome when the gateway holds it
// before answering (a body of known length up to 64 KiB), and breaks the client's
// connection off when it is streamed: the client never reads a whole answer.
func TestACutOffRoutedAnswerNeverPassesForAWholeOne(t *testing.T) {
	h := newHarness(t, harnessOptions{}, node{id: "node-a", opts: members.Options{Knobs: double.Knobs{Fault: double.FaultMalformed}}})
	for _, gz := range []bool{false, true} {
		a := h.routed(http.MethodGet, "/nodes/node-a/fhir/Patient", "", gz, nil)
		oo := outcomeOf(t, a.body)
		if a.status != 502 || oo.Issue[0].Diagnostics != "member node-a answered HTTP 200 with a JSON body that is cut off" {
			t.Fatalf("gzip=%v: %d %s", gz, a.status, a.body)
		}
		if err := fhirschema.Validate(a.body); err != nil {
			t.Fatal(err)
		}
	}
	base := bigMember(t, 256<<10, gzip.BestSpeed, true)
	h = newHarness(t, harnessOptions{}, node{id: "node-x", url: base})
	for _, ae := range []string{"identity", "gzip"} {
		res, err := h.send(context.Background(), http.MethodGet, "/nodes/node-x/fhir/Patient", nil, http.Header{"Accept-Encoding": {ae}})
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 200 || err == nil {
			t.Fatalf("%s: the cut-off answer was read whole: %d, %d bytes", ae, res.StatusCode, len(body))
		}
	}
}

// A rewritten routed answer is not the member's bytes: a strong ETag of the member's
// is passed on weak (gzipped or not), one already weak as it is.
func TestARewrittenRoutedAnswerHasNoStrongValidator(t *testing.T) {
	var self string
	member := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", fhir.MediaType)
		w.Header().Set("ETag", map[bool]string{true: `W/"2"`, false: `"v1"`}[strings.HasSuffix(r.URL.Path, "/2")])
		fmt.Fprintf(w, `{"resourceType":"Patient","id":"1","link":[{"other":{"reference":"%s/Patient/9"},"type":"seealso"}],"text":{"status":"generated","div":"<div xmlns=\"http://www.w3.org/1999/xhtml\">%s</div>"}}`,
			self, strings.Repeat("x", 2000))
	}))
	defer member.Close()
	self = member.URL + "/fhir"
	h := newHarness(t, harnessOptions{}, node{id: "node-x", url: self})
	for _, gz := range []bool{false, true} {
		if a := h.routed(http.MethodGet, "/nodes/node-x/fhir/Patient/1", "", gz, nil); a.status != http.StatusOK || a.header.Get("ETag") != `W/"v1"` {
			t.Fatalf("gzip %v: %d, ETag %q", gz, a.status, a.header.Get("ETag"))
		}
		if a := h.routed(http.MethodGet, "/nodes/node-x/fhir/Patient/2", "", gz, nil); a.header.Get("ETag") != `W/"2"` {
			t.Fatalf("gzip %v: a weak ETag became %q", gz, a.header.Get("ETag"))
		}
	}
}

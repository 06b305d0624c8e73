package federation_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/ferrofed/ferrofed/gateway/fhir"
	"github.com/ferrofed/ferrofed/test/doubles/members"
	"github.com/ferrofed/ferrofed/test/doubles/members/fhirschema"
)

// TestASearchOfATypeThatIsNotR4sIsA404: a type R4 does not have is no route, whether
// any member would answer it or not; the members are not asked.
func TestASearchOfATypeThatIsNotR4sIsA404(t *testing.T) {
	h := newHarness(t, harnessOptions{}, node{id: "node-a"}, node{id: "node-b"})
	for _, path := range []string{"/fhir/Foo", "/fhir/Foo?name=x", "/fhir/DomainResource", "/fhir/Foo/1", "/fhir/patient"} {
		res, body := h.get(path)
		oo := outcomeOf(t, body)
		if res.StatusCode != 404 || oo.Issue[0].Code != "not-found" || res.Header.Get("Content-Type") != fhir.MediaType {
			t.Fatalf("GET %s: %d %s", path, res.StatusCode, body)
		}
		if err := fhirschema.Validate(body); err != nil {
			t.Fatal(err)
		}
	}
	res, body := h.postForm("/fhir/Foo/_search", "name=x", "application/x-www-form-urlencoded")
	if res.StatusCode != 404 {
		t.Fatalf("POST /fhir/Foo/_search: %d %s", res.StatusCode, body)
	}
	if n := h.members["node-a"].Requests() + h.members["node-b"].Requests(); n != 0 {
		t.Fatalf("the members were asked %d times", n)
	}
	if res, body := h.get("/fhir/Encounter"); res.StatusCode != 200 {
		t.Fatalf("an R4 type: %d %s", res.StatusCode, body)
	}
}

// rawHead sends HEAD path on a connection of its own and returns the status line,
// the headers and every byte the gateway sent after them.
func (h *harness) rawHead(path string) (status string, header http.Header, rest []byte) {
	h.t.Helper()
	u, err := url.Parse(h.URL + path)
	if err != nil {
		h.t.Fatal(err)
	}
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		h.t.Fatal(err)
	}
	defer conn.Close()
	_, err = io.WriteString(conn, "HEAD "+u.RequestURI()+" HTTP/1.1\r\nHost: "+u.Host+"\r\nAuthorization: Bearer "+h.Client+"\r\nConnection: close\r\n\r\n")
	if err != nil {
		h.t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	res, err := http.ReadResponse(br, &http.Request{Method: http.MethodHead})
	if err != nil {
		h.t.Fatal(err)
	}
	res.Body.Close()         // a HEAD's: empty
	rest, _ = io.ReadAll(br) // what follows the head, which must be nothing
	return res.Status, res.Header, rest
}

// TestHEADAnswersWhereverGETDoes under /fhir: the GET's status and head, no body.
func TestHEADAnswersWhereverGETDoes(t *testing.T) {
	h := newHarness(t, harnessOptions{}, node{id: "node-a"})
	for _, c := range []struct {
		path   string
		status int
	}{
		{"/fhir/Patient", 200}, {"/fhir/Patient?_count=1", 200}, {"/fhir/metadata", 200},
		{"/fhir/Patient/node-a.node-a-1", 200}, {"/fhir/Patient/1", 404}, {"/fhir/Foo", 404}, {"/fhir", 404},
	} {
		get, body := h.get(c.path)
		status, header, rest := h.rawHead(c.path)
		if get.StatusCode != c.status {
			t.Fatalf("GET %s: %d", c.path, get.StatusCode)
		}
		if !strings.HasPrefix(status, strconv.Itoa(c.status)+" ") || len(rest) != 0 {
			t.Fatalf("HEAD %s: %s, %d bytes of body: %q", c.path, status, len(rest), rest)
		}
		if header.Get("Content-Type") != fhir.MediaType || header.Get("Content-Length") == "" || header.Get("Content-Length") == "0" {
			t.Fatalf("HEAD %s: headers %v (GET's body %d bytes)", c.path, header, len(body))
		}
	}
	res, body, err := h.do(context.Background(), http.MethodPut, "/fhir/Patient", "", nil)
	if err != nil || res.StatusCode != 405 || res.Header.Get("Allow") != "GET, HEAD" {
		t.Fatalf("PUT: %v %v %s", res, err, body)
	}
}

// TestAnAcceptOfAnotherFHIRVersionIsA406 on /fhir and /nodes alike; R4's 4.0 and
// 4.0.1 are taken. The members are not asked.
func TestAnAcceptOfAnotherFHIRVersionIsA406(t *testing.T) {
	h := newHarness(t, harnessOptions{}, node{id: "node-a"})
	for _, path := range []string{"/fhir/Patient", "/fhir/metadata", "/nodes/node-a/fhir/Patient/node-a-1", "/nodes/node-a/fhir/Patient"} {
		for _, v := range []string{"3.0", "5.0", "1.0.2"} {
			before := h.members["node-a"].Requests()
			res, body, err := h.do(context.Background(), http.MethodGet, path, "", http.Header{"Accept": {"application/fhir+json; fhirVersion=" + v}})
			if err != nil || res.StatusCode != 406 {
				t.Fatalf("%s fhirVersion %s: %v %v %s", path, v, res, err, body)
			}
			if oo := outcomeOf(t, body); oo.Issue[0].Code != "not-supported" || !strings.Contains(oo.Issue[0].Diagnostics, "fhirVersion 4.0") {
				t.Fatalf("%s: %s", path, body)
			}
			if err := fhirschema.Validate(body); err != nil {
				t.Fatal(err)
			}
			if h.members["node-a"].Requests() != before {
				t.Fatalf("%s fhirVersion %s reached the member", path, v)
			}
		}
		for _, v := range []string{"4.0", "4.0.1"} {
			res, body, err := h.do(context.Background(), http.MethodGet, path, "", http.Header{"Accept": {"application/fhir+json; fhirVersion=" + v}})
			if err != nil || res.StatusCode != 200 {
				t.Fatalf("%s fhirVersion %s: %v %v %s", path, v, res, err, body)
			}
		}
	}
}

// TestAFederatedPagesSelfLinkNamesTheParametersUsed: a parameter a lenient member
// ignored (its warning entry says so, its self link leaves it out) is not in the
// page's self link; one every member used is, with the _count the gateway resolved.
func TestAFederatedPagesSelfLinkNamesTheParametersUsed(t *testing.T) {
	h := newHarness(t, harnessOptions{}, node{id: "node-a"}, node{id: "node-b", opts: members.Options{OmitSearchParams: []string{"gender"}}})
	for path, want := range map[string]string{
		"/fhir/Patient?name=smith&colour=blue":              "/fhir/Patient?name=smith&_count=20",
		"/fhir/Patient?colour=blue&name=smith&_count=5":     "/fhir/Patient?name=smith&_count=5",
		"/fhir/Patient?gender=male&name=smith&_sort=family": "/fhir/Patient?name=smith&_count=20&_sort=family",
		"/fhir/Patient?name=smith":                          "/fhir/Patient?name=smith&_count=20",
	} {
		res, body := h.get(path)
		var b searchAnswer
		if err := json.Unmarshal(body, &b); err != nil || res.StatusCode != 200 {
			t.Fatalf("%s: %d %v %s", path, res.StatusCode, err, body)
		}
		if got := b.link("self"); got != h.URL+want {
			t.Errorf("%s: self %s, want %s", path, got, h.URL+want)
		}
	}
}

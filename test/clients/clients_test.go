// Package clients runs FHIR client libraries that nobody here wrote against the built
// ferrofed binary: fhirclient (SMART's JS client), @medplum/core (MedplumClient) and
// fhir-kit-client, from npm at the versions package-lock.json pins. run.mjs drives each
// through its own API (the CapabilityStatement, a federated search paged to its end,
// a read of every entry's fullUrl, a 404 and a refused request) and writes what it saw;
// this test checks it (docs/data-plane.md, "Third-party FHIR clients").
//
// Node and npm are needed: without them the test fails under CI=true and skips
// elsewhere, saying so (as test/controlplane does for the control plane).
package clients

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ferrofed/ferrofed/test/controlplane"
	"github.com/ferrofed/ferrofed/test/doubles/issuer"
	"github.com/ferrofed/ferrofed/test/doubles/members"
	"github.com/ferrofed/ferrofed/test/doubles/members/fhirschema"
	"github.com/ferrofed/ferrofed/test/proctest"
)

const (
	// entries is how many resources of each type every member holds.
	entries = 5
	// pageSize is the _count run.mjs searches with: several pages per search.
	pageSize = 2
	// nodeTimeout bounds one run of run.mjs; npmTimeout the install.
	nodeTimeout = 3 * time.Minute
	npmTimeout  = 8 * time.Minute
)

// types are the resource types run.mjs searches.
var types = []string{"Patient", "Observation"}

// libraries are the packages run.mjs drives, as its summary names them.
var libraries = []string{"fhirclient", "@medplum/core", "fhir-kit-client"}

func TestThirdPartyFHIRClientsAgainstTheBinary(t *testing.T) {
	node := requireNode(t)
	installModules(t)
	dir := t.TempDir()
	binary := filepath.Join(dir, "ferrofed")
	if err := proctest.BuildFerrofed(binary); err != nil {
		t.Fatal(err)
	}
	iss := issuer.New(t)
	token, err := iss.Token(map[string]any{"sub": "third-party-clients", "scope": "system/*.rs"})
	if err != nil {
		t.Fatal(err)
	}
	runs := []struct {
		name string
		// numericIDs gives both members ids 1, 2, 3…: each Type/id is held twice.
		numericIDs bool
		// strict sets [federation] strict_fhir: answers plain R4, no meta.federation.
		strict bool
	}{
		{"distinct ids, as it ships", false, false},
		{"numeric ids, strict_fhir", true, true},
	}
	for _, r := range runs {
		t.Run(r.name, func(t *testing.T) {
			a := members.Start(t, members.Options{ID: "a", Entries: entries, NumericIDs: r.numericIDs, Subjects: true})
			b := members.Start(t, members.Options{ID: "b", Entries: entries, NumericIDs: r.numericIDs, Subjects: true})
			base := startGateway(t, binary, iss, r.strict, a, b)
			out := filepath.Join(t.TempDir(), "out")
			sum := runNode(t, node, base, token, out)
			validate := fhirschema.ValidateFederated
			if r.strict {
				validate = fhirschema.Validate
			}
			checkFiles(t, out, validate, a, b)
			checkSummary(t, sum, base, token)
			checkIdentity(t, sum)
			logPaging(t, sum, base)
		})
	}
}

// requireNode returns node's path once node (20 or later) and npm are there; else it
// fails under CI=true and skips elsewhere.
func requireNode(t *testing.T) string {
	t.Helper()
	missing := ""
	node, err := exec.LookPath("node")
	if err != nil {
		missing = "no node on PATH"
	} else if _, err := exec.LookPath("npm"); err != nil {
		missing = "no npm on PATH"
	} else if v, err := exec.Command(node, "--version").Output(); err != nil {
		missing = fmt.Sprintf("node --version: %v", err)
	} else if major, _ := strconv.Atoi(strings.SplitN(strings.TrimPrefix(strings.TrimSpace(string(v)), "v"), ".", 2)[0]); major < 20 {
		missing = fmt.Sprintf("node %s is older than 20", strings.TrimSpace(string(v)))
	}
	if missing == "" {
		return node
	}
	controlplane.SkipOrFail(t, missing+" (the third-party FHIR client tests run on Node 20 or later with npm; .ci/run installs them)")
	return ""
}

// here is this package's folder, where package.json is.
func here() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(file)
}

// installModules runs `npm ci` once per lock file: a stamp in node_modules holds the
// hash of the package-lock.json it was installed from. The optional dependencies are
// left out: what the lock file marks optional is isomorphic-webcrypto's React Native and
// Expo platform packages (fhirclient's browser crypto), none of which runs in Node.
func installModules(t *testing.T) {
	t.Helper()
	dir := here()
	lock, err := os.ReadFile(filepath.Join(dir, "package-lock.json"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(lock)
	want := hex.EncodeToString(sum[:])
	stamp := filepath.Join(dir, "node_modules", ".ferrofed-lock-sha256")
	if got, err := os.ReadFile(stamp); err == nil && strings.TrimSpace(string(got)) == want {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), npmTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "npm", "ci", "--no-audit", "--no-fund", "--ignore-scripts", "--omit=optional")
	cmd.Dir = dir
	cmd.WaitDelay = 5 * time.Second
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm ci in %s: %v\n%s", dir, err, msg)
	}
	if err := os.WriteFile(stamp, []byte(want+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// startGateway writes a ferrofed.toml over the members, trusting iss on the data plane
// (which asks for a token, as it ships), starts `ferrofed serve` and waits until it is
// ready. It returns the gateway's base URL (base_path /gw).
func startGateway(t *testing.T, binary string, iss *issuer.Issuer, strict bool, ms ...*members.Server) string {
	t.Helper()
	port := freePort(t)
	var conf strings.Builder
	fmt.Fprintf(&conf, "[server]\nlisten = \"127.0.0.1:%d\"\nbase_path = \"/gw\"\ntermination_message_path = \"\"\n\n", port)
	if strict {
		conf.WriteString("[federation]\nstrict_fhir = true\n\n")
	}
	for _, m := range ms {
		fmt.Fprintf(&conf, "[[registry.members]]\nid = %q\nquery_endpoint = %q\n\n", m.Opts.ID, m.URL)
	}
	conf.WriteString(iss.Table())
	path := filepath.Join(t.TempDir(), "ferrofed.toml")
	if err := os.WriteFile(path, []byte(conf.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, binary, "serve", "--config", path)
	logs := &proctest.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cancel()
		// Killed by cancel: the exit status says only that.
		if err := <-exited; t.Failed() {
			t.Logf("serve's log (it exited: %v):\n%s", err, logs.String())
		}
	})
	base := fmt.Sprintf("http://127.0.0.1:%d/gw", port)
	deadline := time.Now().Add(15 * time.Second)
	for {
		select {
		case err := <-exited:
			t.Fatalf("serve exited at start: %v\n%s", err, logs.String())
		default:
		}
		if res, err := http.Get(base + "/health/readiness"); err == nil {
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return base
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s is not ready\n%s", base, logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// freePort returns a loopback port nothing listens on now.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// runNode runs run.mjs against base, bounded by nodeTimeout, and reads its summary. A
// non-zero exit (an exception a library was not meant to throw) fails the test.
func runNode(t *testing.T, node, base, token, out string) summary {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), nodeTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "run.mjs")
	cmd.Dir = here()
	cmd.Env = append(os.Environ(), "FERROFED_BASE="+base, "FERROFED_TOKEN="+token, "FERROFED_OUT="+out,
		"FERROFED_TYPES="+strings.Join(types, ","), "FERROFED_COUNT="+strconv.Itoa(pageSize), "FERROFED_MEMBER=a")
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	begin := time.Now()
	err := cmd.Run()
	t.Logf("node run.mjs (%s):\n%s", time.Since(begin).Round(time.Millisecond), stdout.String())
	if ctx.Err() != nil {
		t.Fatalf("node run.mjs did not finish within %s\n%s", nodeTimeout, stderr.String())
	}
	if err != nil {
		t.Errorf("node run.mjs: %v\n%s", err, stderr.String())
	}
	data, rerr := os.ReadFile(filepath.Join(out, "summary.json"))
	if rerr != nil {
		t.Fatalf("no summary: %v", rerr)
	}
	var s summary
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatalf("summary: %v", err)
	}
	if len(s.Libraries) != len(libraries) {
		t.Fatalf("the summary has %d libraries, want %d", len(s.Libraries), len(libraries))
	}
	return s
}

// summary is what run.mjs writes into summary.json.
type summary struct {
	Base      string    `json:"base"`
	FHIRBase  string    `json:"fhirBase"`
	Libraries []library `json:"libraries"`
}

type library struct {
	Library    string `json:"library"`
	Version    string `json:"version"`
	Capability *struct {
		ResourceType string `json:"resourceType"`
		FHIRVersion  string `json:"fhirVersion"`
		URL          string `json:"url"`
	} `json:"capability"`
	Searches map[string]search `json:"searches"`
	Reads    []struct {
		FullURL string `json:"fullUrl"`
		Same    bool   `json:"same"`
	} `json:"reads"`
	Errors   map[string]probe `json:"errors"`
	Identity map[string]json.RawMessage
	Requests []struct {
		Method string `json:"method"`
		URL    string `json:"url"`
		Status int    `json:"status"`
	} `json:"requests"`
	Unexpected []string `json:"unexpected"`
}

type search struct {
	Pages       int      `json:"pages"`
	Matches     int      `json:"matches"`
	Outcomes    int      `json:"outcomes"`
	PageMatches []int    `json:"pageMatches"`
	Totals      []*int   `json:"totals"`
	FullURLs    []string `json:"fullUrls"`
	TypeIDs     []string `json:"typeIds"`
	LastHasNext *bool    `json:"lastHasNext"`
	Links       []struct {
		Relation string `json:"relation"`
		URL      string `json:"url"`
	} `json:"links"`
}

type probe struct {
	URL        string          `json:"url"`
	Threw      bool            `json:"threw"`
	ErrorType  string          `json:"errorType"`
	Status     *int            `json:"status"`
	WireStatus *int            `json:"wireStatus"`
	Outcome    json.RawMessage `json:"outcome"`
	IssueCodes []string        `json:"issueCodes"`
	Message    string          `json:"message"`
}

// checkFiles validates every Bundle, OperationOutcome, CapabilityStatement and
// resource the libraries returned against the R4 schema, and fails on any file that
// names a member's own address.
func checkFiles(t *testing.T, out string, validate func([]byte) error, ms ...*members.Server) {
	t.Helper()
	var hosts []string
	for _, m := range ms {
		u, err := url.Parse(m.URL)
		if err != nil {
			t.Fatal(err)
		}
		hosts = append(hosts, u.Host)
	}
	kinds := map[string]int{}
	err := filepath.WalkDir(out, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(out, p)
		for _, h := range hosts {
			if bytes.Contains(data, []byte(h)) {
				t.Errorf("%s names a member's own address %s", rel, h)
			}
		}
		if d.Name() == "summary.json" {
			return nil
		}
		kind, _, _ := strings.Cut(d.Name(), "-")
		kinds[kind]++
		if err := validate(data); err != nil {
			t.Errorf("%s: %v", rel, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Per library: a CapabilityStatement, pages, reads and outcomes.
	for _, k := range []string{"capability.json", "bundle", "read", "outcome"} {
		if kinds[k] < len(libraries) {
			t.Errorf("%d files of kind %s, want at least one per library (%v)", kinds[k], k, kinds)
		}
	}
}

// checkSummary checks what each library saw: the gateway's CapabilityStatement, each
// search paged to its end, every entry read through its fullUrl, only the gateway's
// address in every URL, and the OperationOutcome of each error as the gateway sent it.
func checkSummary(t *testing.T, s summary, base, token string) {
	t.Helper()
	want := 2 * entries
	var first []string
	for _, l := range s.Libraries {
		name := l.Library + "@" + l.Version
		for _, u := range l.Unexpected {
			t.Errorf("%s: unexpected: %s", name, u)
		}
		if c := l.Capability; c == nil || c.ResourceType != "CapabilityStatement" || c.FHIRVersion != "4.0.1" || c.URL != base+"/fhir" {
			t.Errorf("%s: CapabilityStatement %+v, want 4.0.1 at %s/fhir", name, c, base)
		}
		var all []string
		for _, typ := range types {
			x, ok := l.Searches[typ]
			if !ok {
				t.Errorf("%s: no search of %s", name, typ)
				continue
			}
			distinct := slices.Compact(slices.Sorted(slices.Values(x.FullURLs)))
			if x.Matches != want || len(distinct) != want || x.LastHasNext == nil || *x.LastHasNext || x.Pages < want/pageSize || x.Outcomes != 0 {
				t.Errorf("%s: %s: %d pages, %d matches (%d distinct), %d outcome entries, last page has next: %v; want %d matches in at least %d pages, none after",
					name, typ, x.Pages, x.Matches, len(distinct), x.Outcomes, ptr(x.LastHasNext), want, want/pageSize)
			}
			// MedplumClient asks each next page with _count=1000 beside _page: the
			// page size stays the first page's (docs/data-plane.md, "Paging and the
			// continuation token").
			if slices.Max(append([]int{0}, x.PageMatches...)) > pageSize {
				t.Errorf("%s: %s: matches per page %v, want at most %d", name, typ, x.PageMatches, pageSize)
			}
			for i, total := range x.Totals {
				if total == nil || *total != want {
					t.Errorf("%s: %s page %d: total %v, want %d", name, typ, i+1, ptr(total), want)
				}
			}
			// Every match in the federated identity: its id {member}.{id}, its fullUrl
			// the gateway's read of that id (docs/data-plane.md, "One identity space").
			for i, u := range x.FullURLs {
				member, _, fed := strings.Cut(strings.TrimPrefix(x.TypeIDs[i], typ+"/"), ".")
				if u != base+"/fhir/"+x.TypeIDs[i] || !fed || (member != "a" && member != "b") {
					t.Errorf("%s: %s: fullUrl %s of %s, want %s/fhir/%s/{member}.{id}", name, typ, u, x.TypeIDs[i], base, typ)
				}
			}
			for _, link := range x.Links {
				if !strings.HasPrefix(link.URL, base+"/fhir/"+typ+"?") {
					t.Errorf("%s: %s: link %s %s is not under %s/fhir/%s", name, typ, link.Relation, link.URL, base, typ)
				}
			}
			all = append(all, distinct...)
		}
		if first == nil {
			first = all
		} else if !slices.Equal(first, all) {
			t.Errorf("%s saw other fullUrls than %s:\n%q\n%q", name, s.Libraries[0].Library, all, first)
		}
		if len(l.Reads) != len(types)*want {
			t.Errorf("%s: %d reads through fullUrl, want %d", name, len(l.Reads), len(types)*want)
		}
		for _, r := range l.Reads {
			if !r.Same {
				t.Errorf("%s: reading %s gave another resource", name, r.FullURL)
			}
		}
		for _, r := range l.Requests {
			if !strings.HasPrefix(r.URL, base+"/") {
				t.Errorf("%s sent %s %s: not to the gateway", name, r.Method, r.URL)
			}
		}
		checkErrors(t, name, l, token)
	}
}

// checkErrors compares each error probe with the gateway's own answer to the same
// request: the status the library saw on the wire, and, where the library's error
// carries the body, the same OperationOutcome issue codes.
func checkErrors(t *testing.T, name string, l library, token string) {
	t.Helper()
	for _, p := range []string{"notFoundGateway", "notFoundFederated", "notFoundRouted", "unauthorized"} {
		e, ok := l.Errors[p]
		if !ok {
			t.Errorf("%s: no %s probe", name, p)
			continue
		}
		auth := token
		if p == "unauthorized" {
			auth = ""
		}
		status, codes := gatewayAnswer(t, e.URL, auth)
		wantStatus := map[string]int{"notFoundGateway": 404, "notFoundFederated": 404, "notFoundRouted": 404, "unauthorized": 401}[p]
		if status != wantStatus {
			t.Errorf("the gateway answers %s with %d, want %d", e.URL, status, wantStatus)
		}
		if !e.Threw || e.WireStatus == nil || *e.WireStatus != status {
			t.Errorf("%s: %s: threw %v, saw %v on the wire; want an error of %d", name, p, e.Threw, ptr(e.WireStatus), status)
			continue
		}
		// MedplumClient's OperationOutcomeError has no status, only the outcome.
		if (e.Status == nil && l.Library != "@medplum/core") || (e.Status != nil && *e.Status != status) {
			t.Errorf("%s: %s: the error says status %v, the wire %d", name, p, ptr(e.Status), status)
		}
		// MedplumClient answers any 401 with an outcome of its own ("unauthorized",
		// issue code login), not the server's body; its code is the gateway's.
		if !slices.Equal(e.IssueCodes, codes) {
			t.Errorf("%s: %s: the error carried issue codes %q (%s), the gateway sent %q", name, p, e.IssueCodes, e.Message, codes)
		}
	}
}

// gatewayAnswer GETs url (with token, unless "") and returns the status and the
// OperationOutcome's issue codes.
func gatewayAnswer(t *testing.T, u, token string) (int, []string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/fhir+json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var oo struct {
		ResourceType string `json:"resourceType"`
		Issue        []struct {
			Code string `json:"code"`
		} `json:"issue"`
	}
	if err := json.NewDecoder(res.Body).Decode(&oo); err != nil || oo.ResourceType != "OperationOutcome" {
		t.Fatalf("GET %s: %d, not an OperationOutcome (%v)", u, res.StatusCode, err)
	}
	codes := []string{}
	for _, i := range oo.Issue {
		codes = append(codes, i.Code)
	}
	return res.StatusCode, codes
}

// logPaging logs the requests each library sent for the pages of its first search:
// how it turns a next link into a request.
func logPaging(t *testing.T, s summary, base string) {
	t.Helper()
	for _, l := range s.Libraries {
		var pages []string
		for _, r := range l.Requests {
			if strings.HasPrefix(r.URL, base+"/fhir/"+types[0]+"?") {
				u := pageToken.ReplaceAllString(strings.TrimPrefix(r.URL, base), "_page={token}")
				pages = append(pages, fmt.Sprintf("%d %s", r.Status, u))
			}
		}
		t.Logf("%s asked for the pages of %s:\n  %s", l.Library, types[0], strings.Join(pages, "\n  "))
	}
}

// identity is what run.mjs records of each library's references and Type/ids.
type identity struct {
	Collisions []struct {
		Key      string   `json:"key"`
		FullURLs []string `json:"fullUrls"`
	} `json:"collisions"`
	// fhirclient's resolveReferences over the Observation pages.
	ResolveReferences *struct {
		OK       bool              `json:"ok"`
		Pages    int               `json:"pages"`
		Resolved int               `json:"resolved"`
		Wrong    []json.RawMessage `json:"wrong"`
		Error    json.RawMessage   `json:"error"`
	} `json:"resolveReferences"`
	// MedplumClient's readReference of each subject: from its cache, then the server.
	ReadReference []struct {
		From             string `json:"from"`
		Reference        string `json:"reference"`
		CachedSameMember *bool  `json:"cachedSameMember"`
		Server           struct {
			OK         bool `json:"ok"`
			SameMember bool `json:"sameMember"`
		} `json:"server"`
	} `json:"readReference"`
	// fhir-kit-client's resolve of each subject (its page as context), and of a fullUrl.
	Resolve []struct {
		From      string `json:"from"`
		Reference string `json:"reference"`
		OK        bool   `json:"ok"`
		Same      bool   `json:"same"`
	} `json:"resolve"`
	ResolveAbsolute *struct {
		OK bool `json:"ok"`
	} `json:"resolveAbsolute"`
}

// checkIdentity checks the libraries' view of the federated identity: no Type/id met
// under two fullUrls (so MedplumClient's cache, keyed by Type/id, keeps every
// resource apart), and every Observation's subject resolved, by each library's own
// means, to that Patient of the Observation's member
// (docs/data-plane.md, "One identity space").
func checkIdentity(t *testing.T, s summary) {
	t.Helper()
	subjects := entries * 2 // every Observation has a subject (members.Options.Subjects)
	for _, l := range s.Libraries {
		var id identity
		raw, _ := json.Marshal(l.Identity)
		if err := json.Unmarshal(raw, &id); err != nil {
			t.Fatalf("%s: identity: %v", l.Library, err)
		}
		for _, c := range id.Collisions {
			t.Errorf("%s: %s is %d resources: %q", l.Library, c.Key, len(c.FullURLs), c.FullURLs)
		}
		switch l.Library {
		case "fhirclient":
			r := id.ResolveReferences
			if r == nil || !r.OK || r.Resolved != subjects || len(r.Wrong) != 0 {
				t.Errorf("fhirclient resolveReferences: %s; want all %d subjects resolved, each to its own member's Patient", compact(l.Identity["resolveReferences"]), subjects)
			}
		case "@medplum/core":
			if len(id.ReadReference) != subjects {
				t.Errorf("MedplumClient readReference: %d subjects read, want %d", len(id.ReadReference), subjects)
			}
			for _, r := range id.ReadReference {
				if (r.CachedSameMember != nil && !*r.CachedSameMember) || !r.Server.OK || !r.Server.SameMember {
					t.Errorf("MedplumClient readReference of %s from %s: cached from the same member %v, from the server %+v",
						r.Reference, r.From, ptr(r.CachedSameMember), r.Server)
				}
			}
		case "fhir-kit-client":
			if len(id.Resolve) != subjects || id.ResolveAbsolute == nil || !id.ResolveAbsolute.OK {
				t.Errorf("fhir-kit-client resolve: %d subjects, a fullUrl: %s; want %d and the fullUrl read", len(id.Resolve), compact(l.Identity["resolveAbsolute"]), subjects)
			}
			for _, r := range id.Resolve {
				if !r.OK || !r.Same {
					t.Errorf("fhir-kit-client resolve of %s from %s: ok %v, its own member's %v", r.Reference, r.From, r.OK, r.Same)
				}
			}
		}
	}
}

var (
	spaces    = regexp.MustCompile(`\s+`)
	pageToken = regexp.MustCompile(`_page=[^&]+`)
)

func compact(raw json.RawMessage) string {
	s := spaces.ReplaceAllString(string(raw), " ")
	if len(s) > 2000 {
		s = s[:2000] + "…"
	}
	return s
}

func ptr[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}

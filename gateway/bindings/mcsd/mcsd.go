// Package mcsd is the gateway's mCSD Care Services Selective Consumer
// (docs/bindings.md, "Directory"): the member registry read from an IHE mCSD
// directory ([registry.mcsd]) instead of [[registry.members]]. It loads the directory
// once with ITI-90 (`GET
// [url]/Organization?active=true&_include=Organization:endpoint&_count=100`, every
// page), then refreshes it with ITI-91 (`GET [url]/Organization/_history?_since=…` and
// `GET [url]/Endpoint/_history?_since=…`, every page) on refresh_interval_ms.
//
// A member is an active Organization with an identifier of member_identifier_system
// (its id) that references an active Endpoint of connection type hl7-fhir-rest (its
// query_endpoint is the Endpoint's address, its endpoint id "<id>-query"); an
// Organization that lacks either is not a member. When the configuration reads them
// (an XCPD localizer; [resolver] or a PIXm localizer), a member's home_community_id
// is the value of an identifier typed MCSDEndpointIdentifierTypes#HCID of an active
// Endpoint it references (of any connection type; a bare OID is written urn:oid:),
// and its identifier_system the value of its Organization identifier of
// patient_domain_identifier_system (mCSD has no field for a patient identifier
// domain). Each accepted registry gives them to the patient-scoped flow, and the
// cache file keeps them. Each refresh builds the candidate
// registry from what the directory holds, checks it by the rules of
// [[registry.members]] and the rest of the configuration against it, and swaps it in
// at once or refuses it; the registry last accepted keeps serving, and is kept in
// cache_file so that a restart with the directory down still becomes ready.
//
// The report key is "directory" (with "directory_fault"), from each refresh:
//
//	accepted (no change, or a valid change)                        up
//	change refused: the registry breaks a rule of its own          degraded, registry-invalid
//	(an id or endpoint id malformed or twice, an address that is
//	not an absolute http(s) URL, no member at all; two home
//	community ids or domains for one member, one for two members,
//	a home community id that is no OID)
//	change refused: the rest of the configuration does not fit     degraded, configuration-mismatch
//	401, 403                                                       failing, refused-credentials
//	any other status but 2xx (3xx included: never followed)        failing
//	an answer that breaks ITI-90/91 (not a searchset/history       failing
//	Bundle, an entry without request.method, a DELETE without a
//	url, a next link outside url, a page linking to a page read)
//	or past a cap (pages, page bytes, resources, members)
//	an exchange whose audit record could not be stored             failing (refresh not used)
//	no answer before the refresh's deadline (timeout_ms)           down
//
// degraded stays until a refresh is accepted. The report never names a member, an
// endpoint or a URL; the log says why a change was refused. Each exchange records a
// BALP Query AuditEvent (subtype ITI-90 or ITI-91) through the audit trail.
//
// The next _since is the first page's Bundle.meta.lastUpdated (the directory's clock;
// the local clock when absent) less a 60 s lookback: an update seen twice is applied
// twice, to the same result. Within one answer the first entry of an id wins
// (history is newest first).
package mcsd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"

	"github.com/ferrofed/ferrofed/gateway/bindings"
	"github.com/ferrofed/ferrofed/gateway/config"
	"github.com/ferrofed/ferrofed/gateway/dependencies"
)

// Key is the directory's report key.
const Key = "directory"

// The classes of directory_fault.
const (
	FaultRegistryInvalid       = "registry-invalid"
	FaultConfigurationMismatch = "configuration-mismatch"
	FaultRefusedCredentials    = "refused-credentials"
)

// The IHE transactions of the exchanges.
const (
	TransactionFind    = "ITI-90"
	TransactionUpdates = "ITI-91"
)

// ProfileQuery is BALP's (non-patient) query profile, the directory's AuditEvents'.
const ProfileQuery = "https://profiles.ihe.net/ITI/BALP/StructureDefinition/IHE.BasicAudit.Query"

// Lookback is what the next _since is moved back by, against clock skew.
const Lookback = 60 * time.Second

// Limits bound what one refresh reads.
type Limits struct {
	// Count is the _count asked of each page; default 100.
	Count int
	// MaxPages bounds the pages of one refresh, every type together; default 100.
	MaxPages int
	// MaxPageBytes caps one page's body; default 4 MiB.
	MaxPageBytes int64
	// MaxResources bounds the entries one refresh reads and the resources the
	// directory holds; default 10,000.
	MaxResources int
	// MaxMembers bounds the members; default config.MaxDirectoryMembers.
	MaxMembers int
	// Lookback moves the next _since back; default the constant Lookback, negative
	// for none (tests that count what a refresh reads).
	Lookback time.Duration
}

func (l Limits) withDefaults() Limits {
	if l.Count <= 0 {
		l.Count = 100
	}
	if l.MaxPages <= 0 {
		l.MaxPages = 100
	}
	if l.MaxPageBytes <= 0 {
		l.MaxPageBytes = 4 << 20
	}
	if l.MaxResources <= 0 {
		l.MaxResources = 10000
	}
	if l.MaxMembers <= 0 {
		l.MaxMembers = config.MaxDirectoryMembers
	}
	switch {
	case l.Lookback == 0:
		l.Lookback = Lookback
	case l.Lookback < 0:
		l.Lookback = 0
	}
	return l
}

// Registry is where an accepted registry is swapped in: *federation.Surface.
type Registry interface {
	PrepareDirectory(members []config.Member) (apply func(), err error)
}

// Options build a Directory.
type Options struct {
	// Config is the configuration in force; its Registry.MCSD is the table.
	Config *config.Config
	// Registry takes each accepted registry.
	Registry Registry
	// Recorder stores each exchange's AuditEvent; nil stores nothing.
	Recorder bindings.Recorder
	// Metrics counts the exchanges; nil counts nothing.
	Metrics *bindings.Metrics
	// Tracker is the dependency report the directory's state goes into, "unknown"
	// until its first refresh; required.
	Tracker *dependencies.Tracker
	// Logger says why a change was refused; default logr.Discard().
	Logger logr.Logger
	// Transport, when set, is the client's base transport (tests).
	Transport *http.Transport
	// Limits; zero values take the defaults.
	Limits Limits
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// Outcome is what one refresh came to.
type Outcome struct {
	// State and Fault are what the refresh put in the report.
	State dependencies.State
	Fault string
	// Swapped is true when a new registry was swapped in.
	Swapped bool
	// Members is how many members the registry in force has.
	Members int
	// Why says what was wrong, for the log: it may name a member or a key, never the
	// report.
	Why string
}

// Directory is the registry's mCSD consumer and its refresh loop.
type Directory struct {
	table    *config.MCSD
	base     *url.URL
	cfg      atomic.Pointer[config.Config]
	reg      Registry
	client   *bindings.Client
	rec      bindings.Recorder
	log      logr.Logger
	lim      Limits
	now      func() time.Time
	timeout  time.Duration
	interval time.Duration
	tracker  *dependencies.Tracker

	// mu makes refreshes one at a time; what follows is theirs.
	mu sync.Mutex
	// held is what the directory holds, as read; nil until an ITI-90 load succeeded.
	held *store
	// since is the next ITI-91's _since.
	since time.Time
	// served is the registry in force (accepted, or read from the cache).
	served []config.Member

	stopOnce sync.Once
	cancel   context.CancelFunc
	done     chan struct{}
}

// store is the Organizations and Endpoints the directory holds, by logical id.
type store struct {
	orgs      map[string]*resource
	endpoints map[string]*resource
}

func (s *store) size() int { return len(s.orgs) + len(s.endpoints) }

// New builds the consumer of cfg's [registry.mcsd]; the credential files are read now.
// Nothing is sent before Start.
func New(o Options) (*Directory, error) {
	if o.Config == nil || o.Config.Registry.MCSD == nil {
		return nil, errors.New("mcsd: no [registry.mcsd] table")
	}
	if o.Registry == nil {
		return nil, errors.New("mcsd: no registry to swap into")
	}
	if o.Tracker == nil {
		return nil, errors.New("mcsd: no dependency tracker")
	}
	t := o.Config.Registry.MCSD
	base, err := url.Parse(strings.TrimSuffix(t.URL, "/"))
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return nil, errors.New("registry.mcsd.url: must be an absolute http or https URL")
	}
	if o.Logger.GetSink() == nil {
		o.Logger = logr.Discard()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	lim := o.Limits.withDefaults()
	timeout := t.Timeout()
	c, err := bindings.NewClient(bindings.ClientOptions{
		Name: Key, Table: "registry.mcsd", Timeout: timeout, MaxResponseBytes: lim.MaxPageBytes, Credentials: t.Credentials,
		Metrics: o.Metrics, Transport: o.Transport,
	})
	if err != nil {
		return nil, err
	}
	d := &Directory{table: t, base: base, reg: o.Registry, client: c, rec: o.Recorder, log: o.Logger, lim: lim, now: o.Now,
		timeout: timeout, interval: t.RefreshInterval(), tracker: o.Tracker}
	d.cfg.Store(o.Config)
	o.Tracker.SetService(Key, dependencies.Unknown, "")
	return d, nil
}

// UseConfig makes cfg the configuration later candidates are checked against (a
// reload); the table's own keys are read at start.
func (d *Directory) UseConfig(cfg *config.Config) { d.cfg.Store(cfg) }

// Start serves the cached registry, when cache_file holds one the configuration
// accepts, then starts the refresh loop: a refresh at once, then one every
// refresh_interval_ms. Stop ends it.
func (d *Directory) Start() error {
	d.mu.Lock()
	if n, err := d.loadCache(); err != nil {
		d.log.Info("Ignored the directory's cache file", "file", d.table.CacheFile, "reason", err.Error())
	} else if n > 0 {
		d.log.Info("Serving the registry cached from the directory until its first refresh", "members", n)
	}
	d.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	d.cancel, d.done = cancel, make(chan struct{})
	go d.loop(ctx)
	return nil
}

func (d *Directory) loop(ctx context.Context) {
	defer close(d.done)
	last := Outcome{}
	for {
		o := d.Refresh(ctx)
		if ctx.Err() != nil {
			return
		}
		if o.State != last.State || o.Fault != last.Fault || o.Swapped {
			d.log.Info("Refreshed the registry from the directory", "state", o.State, "fault", o.Fault, "swapped", o.Swapped, "members", o.Members, "reason", o.Why)
		} else {
			d.log.V(1).Info("Refreshed the registry from the directory", "state", o.State, "members", o.Members)
		}
		last = o
		t := time.NewTimer(d.interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// Stop ends the refresh loop (drain step 4): a refresh under way is cancelled. It
// returns once the loop ended, or with ctx's error when ctx ends first.
func (d *Directory) Stop(ctx context.Context) error {
	var err error
	d.stopOnce.Do(func() {
		if d.cancel == nil {
			return
		}
		d.cancel()
		select {
		case <-d.done:
		case <-ctx.Done():
			err = ctx.Err()
		}
		d.client.CloseIdleConnections()
	})
	return err
}

// Refresh runs one refresh within timeout_ms: ITI-90 until one load succeeded, ITI-91
// after. It sets the report key and returns what it came to.
func (d *Directory) Refresh(ctx context.Context) Outcome {
	d.mu.Lock()
	defer d.mu.Unlock()
	o := d.refresh(ctx)
	o.Members = len(d.served)
	// A refresh cut short by Stop says nothing of the directory.
	if ctx.Err() == nil {
		d.tracker.SetService(Key, o.State, o.Fault)
	}
	return o
}

func (d *Directory) refresh(ctx context.Context) Outcome {
	rctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	start := d.now()
	var mark string
	var fe *fetchError
	if d.held == nil {
		var st *store
		st, mark, fe = d.load(rctx)
		if fe == nil {
			d.held = st
		}
	} else {
		mark, fe = d.updates(rctx)
	}
	if fe != nil {
		return Outcome{State: fe.state, Fault: fe.fault, Why: fe.why}
	}
	d.since = start
	if t, err := time.Parse(time.RFC3339Nano, mark); err == nil {
		d.since = t
	}
	d.since = d.since.Add(-d.lim.Lookback)

	members, invalid := d.members(d.held)
	if len(members) > d.lim.MaxMembers {
		return Outcome{State: dependencies.Failing, Why: fmt.Sprintf("the directory names %d members, more than %d", len(members), d.lim.MaxMembers)}
	}
	if invalid != "" {
		return Outcome{State: dependencies.Degraded, Fault: FaultRegistryInvalid, Why: invalid}
	}
	if d.served != nil && slices.Equal(members, d.served) {
		return Outcome{State: dependencies.Up}
	}
	fault, why := d.swap(members)
	if fault != "" {
		return Outcome{State: dependencies.Degraded, Fault: fault, Why: why}
	}
	if err := d.saveCache(members); err != nil {
		d.log.Error(err, "Could not keep the accepted registry in the cache file", "file", d.table.CacheFile)
	}
	return Outcome{State: dependencies.Up, Swapped: true}
}

// swap checks members and swaps them in; fault is the class of a refusal.
func (d *Directory) swap(members []config.Member) (fault, why string) {
	// Validate checks the members' own rules too: they are asked apart only to
	// class a refusal, so that an accepted registry is checked once.
	if ps := d.cfg.Load().WithMembers(members).Validate(config.Options{SkipFiles: true}); len(ps) > 0 || len(members) == 0 {
		if own := config.MemberProblems(members); len(own) > 0 {
			return FaultRegistryInvalid, problemsText(own)
		}
		return FaultConfigurationMismatch, problemsText(ps)
	}
	apply, err := d.reg.PrepareDirectory(members)
	if err != nil {
		return FaultConfigurationMismatch, err.Error()
	}
	apply()
	d.served = members
	return "", ""
}

// problemsText is the first problems, for the log.
func problemsText(ps []config.Problem) string {
	var b strings.Builder
	for i, p := range ps {
		if i == 5 {
			fmt.Fprintf(&b, "; and %d more", len(ps)-i)
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(p.String())
	}
	return b.String()
}

// members is the candidate registry of what the directory holds, by member id, and
// what makes it invalid beyond the rules of config.MemberProblems ("" when nothing):
// a member whose Endpoints give two home community ids, or whose Organization gives
// two patient identifier domains. A member's identifier_system (the value of its
// Organization identifier of patient_domain_identifier_system) and home_community_id
// (the value of an identifier typed MCSDEndpointIdentifierTypes#HCID of an active
// Endpoint it references, of any connection type, as home_community_id is written)
// are read only when the configuration reads them, as [[registry.members]] refuses
// a key nothing reads.
func (d *Directory) members(st *store) ([]config.Member, string) {
	system := d.table.MemberIdentifierSystem
	cfg := d.cfg.Load()
	domainSystem := ""
	if cfg.UsesIdentifierSystem() {
		domainSystem = d.table.PatientDomainIdentifierSystem
	}
	readHCID := cfg.UsesHomeCommunityID()
	var invalid []string
	out := make([]config.Member, 0, len(st.orgs))
	for _, org := range st.orgs {
		if org.Active != nil && !*org.Active {
			continue
		}
		id, domain, domains := "", "", 0
		for _, idf := range org.Identifier {
			switch {
			case idf.System == system && id == "":
				id = idf.Value
			case domainSystem != "" && idf.System == domainSystem && idf.Value != "" && idf.Value != domain:
				domain = idf.Value
				domains++
			}
		}
		if id == "" {
			continue
		}
		address, ok := "", false
		var hcids []string
		for _, ref := range org.Endpoint {
			typ, eid, refOK := typeAndID(ref.Reference)
			if !refOK || typ != "Endpoint" {
				continue
			}
			ep := st.endpoints[eid]
			if ep == nil || ep.Status != "active" {
				continue
			}
			if readHCID {
				for _, idf := range ep.Identifier {
					if idf.Value != "" && idf.typed(identifierTypeSystem, identifierTypeHCID) {
						if h := config.NormalizeHomeCommunityID(idf.Value); !slices.Contains(hcids, h) {
							hcids = append(hcids, h)
						}
					}
				}
			}
			if !ok && ep.ConnectionType.Code == connectionTypeFHIR &&
				(ep.ConnectionType.System == "" || ep.ConnectionType.System == connectionTypeSystem) {
				address, ok = ep.Address, true
			}
		}
		if !ok {
			continue
		}
		m := config.Member{ID: id, QueryEndpoint: address, EndpointID: id + "-query", IdentifierSystem: domain}
		switch {
		case len(hcids) > 1:
			invalid = append(invalid, fmt.Sprintf("member %q: its Endpoints give %d home community ids (%s)", id, len(hcids), strings.Join(hcids, ", ")))
		case len(hcids) == 1:
			m.HomeCommunityID = hcids[0]
		}
		if domains > 1 {
			invalid = append(invalid, fmt.Sprintf("member %q: its Organization gives %d patient identifier domains", id, domains))
		}
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b config.Member) int {
		if c := strings.Compare(a.ID, b.ID); c != 0 {
			return c
		}
		return strings.Compare(a.QueryEndpoint, b.QueryEndpoint)
	})
	slices.Sort(invalid)
	return out, strings.Join(invalid, "; ")
}

// fetchError is a refresh that read no usable answer.
type fetchError struct {
	state dependencies.State
	fault string
	why   string
}

func failing(format string, args ...any) *fetchError {
	return &fetchError{state: dependencies.Failing, why: fmt.Sprintf(format, args...)}
}

// load is ITI-90: every active Organization and the Endpoints they reference.
func (d *Directory) load(ctx context.Context) (*store, string, *fetchError) {
	st := &store{orgs: map[string]*resource{}, endpoints: map[string]*resource{}}
	q := url.Values{"active": {"true"}, "_include": {"Organization:endpoint"}, "_count": {fmt.Sprint(d.lim.Count)}}
	r := d.reader()
	mark, fe := r.pages(ctx, d.base.String()+"/Organization?"+q.Encode(), "searchset", TransactionFind, func(e *entry) *fetchError {
		if e.Resource == nil {
			return failing("ITI-90: a searchset entry without a resource")
		}
		res := e.Resource
		switch res.ResourceType {
		case "Organization", "Endpoint":
		default:
			return nil // an OperationOutcome, or a type the directory was not asked for
		}
		if res.ID == "" {
			return failing("ITI-90: a %s without an id", res.ResourceType)
		}
		if res.ResourceType == "Organization" {
			st.orgs[res.ID] = res
		} else {
			st.endpoints[res.ID] = res
		}
		return nil
	})
	if fe != nil {
		return nil, "", fe
	}
	if st.size() > d.lim.MaxResources {
		return nil, "", failing("the directory holds more than %d resources", d.lim.MaxResources)
	}
	return st, mark, nil
}

// change is one resource's newest history entry: its new version, or nil (deleted).
type change struct {
	res *resource
}

// updates is ITI-91: the Organizations' and the Endpoints' history since the last
// refresh, applied to what the directory holds once every page of both was read.
func (d *Directory) updates(ctx context.Context) (string, *fetchError) {
	since := d.since.UTC().Format(time.RFC3339Nano)
	r := d.reader()
	var mark string
	changes := map[string]map[string]change{"Organization": {}, "Endpoint": {}}
	for _, typ := range []string{"Organization", "Endpoint"} {
		seen := changes[typ]
		q := url.Values{"_since": {since}, "_count": {fmt.Sprint(d.lim.Count)}}
		m, fe := r.pages(ctx, d.base.String()+"/"+typ+"/_history?"+q.Encode(), "history", TransactionUpdates, func(e *entry) *fetchError {
			if e.Request == nil || e.Request.Method == "" {
				return failing("ITI-91: a history entry without request.method")
			}
			var id string
			switch e.Request.Method {
			case http.MethodDelete:
				t, i, ok := typeAndID(e.Request.URL)
				if !ok || t != typ {
					return failing("ITI-91: a DELETE entry without the url of a %s", typ)
				}
				id = i
			case http.MethodPost, http.MethodPut, http.MethodPatch:
				if e.Resource == nil || e.Resource.ResourceType != typ || e.Resource.ID == "" {
					return failing("ITI-91: a %s entry without a %s and its id", e.Request.Method, typ)
				}
				id = e.Resource.ID
			default:
				return failing("ITI-91: a history entry of method %q", e.Request.Method)
			}
			if _, newer := seen[id]; !newer {
				seen[id] = change{res: e.Resource}
			}
			return nil
		})
		if fe != nil {
			return "", fe
		}
		if mark == "" {
			mark = m
		}
	}
	held := d.held
	size := held.size()
	for typ, byID := range changes {
		m := held.orgs
		if typ == "Endpoint" {
			m = held.endpoints
		}
		for id, c := range byID {
			_, had := m[id]
			switch {
			case c.res != nil && !had:
				size++
			case c.res == nil && had:
				size--
			}
		}
	}
	if size > d.lim.MaxResources {
		return "", failing("the directory would hold more than %d resources", d.lim.MaxResources)
	}
	for typ, byID := range changes {
		m := held.orgs
		if typ == "Endpoint" {
			m = held.endpoints
		}
		for id, c := range byID {
			if c.res == nil {
				delete(m, id)
			} else {
				m[id] = c.res
			}
		}
	}
	return mark, nil
}

// reader reads the pages of one refresh, within its caps.
type reader struct {
	d             *Directory
	pagesLeft     int
	resourcesLeft int
}

func (d *Directory) reader() *reader {
	return &reader{d: d, pagesLeft: d.lim.MaxPages, resourcesLeft: d.lim.MaxResources}
}

// pages reads first and every page after it, handing each entry to each; mark is
// the first page's Bundle.meta.lastUpdated.
func (r *reader) pages(ctx context.Context, first, bundleType, transaction string, each func(*entry) *fetchError) (mark string, fe *fetchError) {
	read := map[string]bool{}
	for u := first; u != ""; {
		if r.pagesLeft == 0 {
			return "", failing("more than %d pages in one refresh", r.d.lim.MaxPages)
		}
		r.pagesLeft--
		if read[u] {
			return "", failing("a next link to a page already read")
		}
		read[u] = true
		b, fe := r.d.get(ctx, u, bundleType, transaction)
		if fe != nil {
			return "", fe
		}
		if u == first {
			mark = b.Meta.LastUpdated
		}
		if r.resourcesLeft -= len(b.Entry); r.resourcesLeft < 0 {
			return "", failing("more than %d entries in one refresh", r.d.lim.MaxResources)
		}
		for i := range b.Entry {
			if fe := each(&b.Entry[i]); fe != nil {
				return "", fe
			}
		}
		next := b.next()
		if next != "" {
			abs, ok := r.d.under(next)
			if !ok {
				return "", failing("a next link outside the directory's url")
			}
			next = abs
		}
		u = next
	}
	return mark, nil
}

// under resolves a next link and reports whether it is under the directory's url:
// the same scheme and host, a path under its path, no credentials.
func (d *Directory) under(link string) (string, bool) {
	ref, err := url.Parse(link)
	if err != nil {
		return "", false
	}
	// A relative link is read against the base as a directory ("Organization?…" is
	// {url}/Organization?…).
	dirBase := *d.base
	dirBase.Path = strings.TrimSuffix(dirBase.Path, "/") + "/"
	dirBase.RawPath = ""
	u := dirBase.ResolveReference(ref)
	if u.Scheme != d.base.Scheme || u.Host != d.base.Host || u.User != nil || u.Fragment != "" {
		return "", false
	}
	for seg := range strings.SplitSeq(u.Path, "/") {
		if seg == ".." || seg == "." {
			return "", false // %2e%2e too: the path is read decoded
		}
	}
	p, bp := u.EscapedPath(), strings.TrimSuffix(d.base.EscapedPath(), "/")
	if p != bp && !strings.HasPrefix(p, bp+"/") {
		return "", false
	}
	return u.String(), true
}

// get reads one page and records its AuditEvent.
func (d *Directory) get(ctx context.Context, u, bundleType, transaction string) (*bundle, *fetchError) {
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		return nil, failing("the request could not be built")
	}
	req.Header.Set("Accept", "application/fhir+json")
	start := d.now()
	ex := d.client.Do(ctx, req)
	display := "Find Matching Care Services"
	if transaction == TransactionUpdates {
		display = "Request Care Services Updates"
	}
	query := strings.TrimPrefix(u, d.base.String())
	ev := bindings.QueryEvent{Key: Key, Transaction: transaction, TransactionDisplay: display, Time: start, Query: []byte(query)}
	stored := bindings.RecordExchange(ctx, ex, ev, queryRecorder{d.rec}, min(d.timeout, 5*time.Second))
	switch {
	case !ex.Sent && !ex.Expired:
		return nil, failing("the request could not be sent: %v", ex.Err)
	case !ex.Answered:
		return nil, &fetchError{state: dependencies.Down, why: "no answer before the refresh's deadline"}
	case !stored:
		return nil, failing("the exchange's audit record could not be stored")
	case ex.HeadTooLarge:
		return nil, failing("an answer head larger than %d KiB", bindings.MaxResponseHeaderBytes>>10)
	case ex.Status == http.StatusUnauthorized || ex.Status == http.StatusForbidden:
		return nil, &fetchError{state: dependencies.Failing, fault: FaultRefusedCredentials, why: fmt.Sprintf("the directory answered %d", ex.Status)}
	case ex.Status < 200 || ex.Status > 299:
		return nil, failing("the directory answered %d", ex.Status)
	case ex.TooLarge:
		return nil, failing("a page larger than %d bytes", d.lim.MaxPageBytes)
	}
	b, err := decodeBundle(ex.Body, bundleType)
	if err != nil {
		return nil, failing("%s: the answer is %v", transaction, err)
	}
	return b, nil
}

// queryRecorder records the exchange's event as BALP's Query, not PatientQuery: the
// directory is asked of no patient.
type queryRecorder struct{ rec bindings.Recorder }

var patientQueryProfile = []byte(`"` + bindings.ProfilePatientQuery + `"`)

func (q queryRecorder) Record(ctx context.Context, event []byte) error {
	if q.rec == nil {
		return nil
	}
	return q.rec.Record(ctx, bytes.Replace(event, patientQueryProfile, []byte(`"`+ProfileQuery+`"`), 1))
}

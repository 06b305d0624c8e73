package federation

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/ferrofed/ferrofed/gateway/bindings/patient"
	"github.com/ferrofed/ferrofed/gateway/calllimit"
	"github.com/ferrofed/ferrofed/gateway/fhir"
	"github.com/ferrofed/ferrofed/gateway/identity"
	"github.com/ferrofed/ferrofed/gateway/outbound"
	"github.com/ferrofed/ferrofed/gateway/proxy"
	"github.com/ferrofed/ferrofed/gateway/searchquery"
	"github.com/ferrofed/ferrofed/gateway/searchset"
	"github.com/ferrofed/ferrofed/gateway/tracing"
)

// maxRounds bounds how many times one page asks its members again to fill itself
// (a member whose pages are shorter than _count, a sorted merge that empties one
// member's page): past it the page is answered with what it has, the rest behind next.
const maxRounds = 16

// search is one page of a federated search being built.
type search struct {
	c            *caller
	cs           *calls
	reg          *registry
	resourceType string
	count        int
	sort         []searchquery.SortKey
	sortRaw      string
	summaryCount bool
	// first is true on a search's first page (no token): every member is asked.
	first bool
	// prefer is the client's Prefer header, sent to every member.
	prefer []string
	// gw is the gateway's base URL as the client reached it.
	gw        string
	positions []*position
	// extras are the include and member outcome entries the page holds so far, at
	// most maxExtras (limits.max_answer_entries less the page's matches).
	extras, maxExtras int
	// excluded are the records of the members a patient-scoped search's flow dropped
	// (patient.go), and flowEntries the outcome entries the flow adds.
	excluded    []Record
	flowEntries [][]byte
	// notAsked are the records of the members a search's references left out
	// (references.go): no patient's data, so every caller sees them.
	notAsked []Record
	// caller (searchquery.Key.Caller) and expires bind the next link's token;
	// operator is true for a caller told why a member was excluded (docs/security.md).
	caller   string
	expires  time.Time
	operator bool
	// consent is the consent question the search relies on, nil for none.
	consent *searchquery.TokenConsent
	// selfs are the self links of the members' first pages (searchquery.UsedQuery).
	selfs []string
}

// position is one member's place in the search, and what this page saw of it.
type position struct {
	m      *member
	cursor string
	offset int
	// remaining is how many matches the member has not given yet (its total, less
	// what was served), -1 when unknown.
	remaining int
	// done: nothing more to ask of the member (its last page was served, or it failed).
	done bool
	// order: where it puts missing values (searchquery.Order); lost: matches unreachable.
	order searchquery.Order
	lost  int

	loaded  bool
	matches []pageEntry // the loaded page's matches not yet served
	next    string      // the loaded page's next, as a cursor ("" for none)

	asked    bool
	record   Record
	failure  *exchange // the last failed exchange, for its outcome entry
	total    *int
	answered bool // a 2xx searchset came back (at least once on this page)
	// unlinked: the member gave a next link the gateway will not follow (not under its
	// base, or no valid cursor); its paging ended there, and the page says so.
	unlinked bool
	// extra are the loaded pages' include and outcome entries for this page.
	extra [][]byte
	// includes are the loaded member page's include entries, each put in extra with
	// the first match linked to it; orphans is true when the member page was loaded
	// from its start, and so the includes no match took go at its end.
	includes []identity.Include
	orphans  bool
	// ident rewrites the member's entries into the federated identity, made once per
	// page (docs/data-plane.md, "One identity space").
	ident *identity.Rewriter
}

// pageEntry is one match, rewritten, with the values it sorts by.
type pageEntry struct {
	json []byte
	keys []searchquery.SortValue
	// head is its resource's type and member's id, for its includes (Rewriter.Key).
	head fhir.Head
}

// pageResult is what a page of a search came to.
type pageResult struct {
	records []Record
	entries [][]byte
	total   *int
	// next is the token of the next page, "" when there is none.
	next string
	// status and outcome, when status is not 200, are the answer instead of a Bundle.
	status  int
	outcome fhir.OperationOutcome
}

// run builds the page.
func (s *search) run(ctx context.Context, budget time.Duration, strictHandling bool, key tokenKey, tokenTotal *int) pageResult {
	rctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	out, taken, ok := s.fill(rctx, ctx, key)
	if !ok {
		return pageResult{status: 499} // the client left; the handler answers nothing
	}
	res := pageResult{status: http.StatusOK}
	anyOK := false
	var failed []*position
	for i, p := range s.positions {
		if !p.asked {
			continue
		}
		p.record.Entries = taken[i]
		res.records = append(res.records, p.record)
		if p.record.Outcome == outbound.OK {
			anyOK = true
		} else {
			failed = append(failed, p)
		}
	}
	res.records = append(res.records, s.notAsked...)
	if s.operator {
		res.records = append(res.records, s.excluded...)
	}
	if strictHandling {
		for _, p := range failed {
			if p.record.Status == http.StatusBadRequest {
				res.status = http.StatusBadRequest
				res.outcome = s.failureOf(p).Refusal()
				return res
			}
		}
	}
	if !anyOK && len(failed) > 0 {
		fs := make([]searchset.Failure, len(failed))
		for i, p := range failed {
			fs[i] = s.failureOf(p)
		}
		res.status, res.outcome = searchset.NoneSucceeded(fs)
		return res
	}
	res.entries = s.entries(out, failed)
	tracing.Event(ctx, tracing.EventMerge, tracing.AttrCount.Int(len(res.entries))) // a count, never a match
	switch {
	case !s.first:
		res.total = tokenTotal
	case !s.excludedAfterDemographics():
		res.total = s.total(anyOK)
	}
	if s.summaryCount {
		return res
	}
	s.link(&res, key)
	if res.next != "" {
		tracing.Event(ctx, tracing.EventPageToken)
	}
	return res
}

// fill takes the page's matches from the members' heads, asking the members again
// (at most maxRounds times) until the page is full or none has more: out are the
// matches in page order, taken how many each position gave. ok is false when the
// client left.
func (s *search) fill(rctx, ctx context.Context, key tokenKey) (out [][]byte, taken []int, ok bool) {
	taken = make([]int, len(s.positions))
	for round := 0; ; {
		// A full page asks no one more: a member emptied by the last entry taken is
		// asked on the next page, not now.
		if round > 0 && (s.summaryCount || len(out) >= s.count) {
			break
		}
		s.settle(key)
		need := s.needed(s.count - len(out))
		if len(need) > 0 {
			if round == maxRounds {
				break
			}
			round++
			s.fetch(rctx, ctx, need)
			if errors.Is(ctx.Err(), context.Canceled) {
				return nil, nil, false
			}
			continue
		}
		if s.summaryCount || len(out) >= s.count {
			break
		}
		i := s.pick()
		if i < 0 {
			break
		}
		out = append(out, s.take(s.positions[i]))
		taken[i]++
	}
	return out, taken, true
}

// take takes p's head match, moving p on to its next page when that was its last.
func (s *search) take(p *position) []byte {
	e := p.matches[0].json
	if len(p.includes) > 0 {
		p.extra = append(p.extra, identity.Attach(e, p.ident.Key(p.matches[0].head), p.includes)...)
	}
	if p.remaining > 0 {
		p.remaining--
	}
	s.pass(p)
	return e
}

// pass moves p past its head match, on to its next page when that was its last.
func (s *search) pass(p *position) {
	p.matches = p.matches[1:]
	p.offset++
	if len(p.matches) == 0 {
		if p.orphans {
			p.extra = append(p.extra, identity.Unsent(p.includes)...)
		}
		if p.includes, p.loaded = nil, false; p.next == "" {
			s.jump(p, p.order.End())
		} else {
			p.cursor, p.offset, p.next = p.next, 0, ""
		}
	}
}

// settle lets each loaded member's order decide its head (searchquery.Order): a match
// held back is passed over; a member to ask again from a mark is unloaded.
func (s *search) settle(key tokenKey) {
	for _, p := range s.positions {
		for len(s.sort) > 0 && p.loaded && len(p.matches) > 0 {
			st := p.order.Next(s.sort, p.matches[0].keys, searchquery.Mark{Cursor: p.cursor, Offset: p.offset}, key.Group)
			if st.Action == searchquery.Serve {
				break
			} else if st.Action == searchquery.Drop {
				s.pass(p)
			} else {
				s.jump(p, st.To)
			}
		}
	}
}

// jump sets p to be asked from to; nil: p is done, what its total promised beyond
// what it gave lost.
func (s *search) jump(p *position, to *searchquery.Mark) {
	p.loaded, p.matches, p.next = false, nil, ""
	if p.done = to == nil; to != nil {
		p.cursor, p.offset = to.Cursor, to.Offset
	} else if p.remaining > 0 && !s.summaryCount {
		p.lost, p.remaining = p.lost+p.remaining, 0
	}
}

// entries are the page's entries: the matches, the flow's outcomes, the members'
// includes and outcomes, an outcome for each failed member and one for each member
// whose next link the gateway does not follow.
func (s *search) entries(out [][]byte, failed []*position) [][]byte {
	entries := out
	entries = append(entries, s.flowEntries...)
	for _, p := range s.positions {
		entries = append(entries, p.extra...)
	}
	for _, p := range failed {
		entries = append(entries, s.failureOf(p).Entry())
	}
	for _, p := range s.positions {
		if p.unlinked || p.lost > 0 {
			entries = append(entries, fhir.OutcomeEntry(searchset.Unreached(p.m.id, p.unlinked, searchquery.MaxCursorBytes, p.lost)))
		}
	}
	return entries
}

// total is a first page's Bundle.total: the sum of the members' totals, nil unless
// every member that answered gave one.
func (s *search) total(anyOK bool) *int {
	total := 0
	for _, p := range s.positions {
		if !p.answered {
			continue
		}
		if p.total == nil {
			return nil
		}
		total += *p.total
	}
	if anyOK || len(s.positions) == 0 {
		// No member asked (the flow excluded every one) is a known total of 0.
		return &total
	}
	return nil
}

// excludedAfterDemographics is true when the flow excluded a member at a step after
// demographics (resolver, consent, localizer): the page then has no total, which would
// tell one step from another; demographics excludes every member, and says why itself.
func (s *search) excludedAfterDemographics() bool {
	for _, r := range s.excluded {
		if r.ExcludedBy != patient.ByDemographics {
			return true
		}
	}
	return false
}

// link sets res's next token from the positions of the members that have more, and
// the warning of a token that could not carry them all.
func (s *search) link(res *pageResult, key tokenKey) {
	t := searchquery.Token{Type: s.resourceType, Count: s.count, Sort: s.sortRaw, Total: res.total, Caller: s.caller, Expires: s.expires.UnixMilli(),
		Consent: s.consent}
	for _, p := range s.positions {
		if !p.done {
			tm := searchquery.TokenMember{ID: p.m.id, Cursor: p.cursor, Offset: p.offset, Order: p.order.Saved()}
			if p.remaining > 0 {
				r := p.remaining
				tm.Remaining = &r
			}
			t.Members = append(t.Members, tm)
		}
	}
	if len(t.Members) == 0 {
		return
	}
	tok, left, err := key.EncodeFitting(t)
	if err != nil {
		res.status = http.StatusInternalServerError
		res.outcome = fhir.Outcome("exception", "the next page cannot be linked: "+err.Error())
		return
	}
	res.next = tok
	if len(left) > 0 {
		res.entries = append(res.entries, fhir.OutcomeEntry(searchquery.UnlinkedOutcome(left)))
	}
}

// needed is the members to ask before the next entry can be chosen (searchset.Needed).
func (s *search) needed(want int) []*position {
	heads := make([]searchset.Head, len(s.positions))
	for i, p := range s.positions {
		heads[i] = searchset.Head{Done: p.done, Loaded: p.loaded, Matches: len(p.matches), Remaining: p.remaining}
	}
	var need []*position
	for _, i := range searchset.Needed(heads, s.first || len(s.sort) > 0, want) {
		need = append(need, s.positions[i])
	}
	return need
}

// pick is the position whose head comes next, -1 when none has one.
func (s *search) pick() int {
	return searchquery.First(s.sort, len(s.positions), func(i int) ([]searchquery.SortValue, bool) {
		p := s.positions[i]
		if p.done || !p.loaded || len(p.matches) == 0 {
			return nil, false
		}
		return p.matches[0].keys, true
	})
}

// fetch asks each of need for its cursor's page in parallel, as many at once as the
// call limits allow, and reads each answer on this goroutine as it comes in (see
// caller.search's note on stacks). An answer is dropped once read: a fan-out holds
// the bodies still coming, not every one it has seen.
func (s *search) fetch(rctx, client context.Context, need []*position) {
	exchanges := make([]exchange, len(need))
	absorb := func(i int) {
		ex := exchanges[i]
		exchanges[i] = exchange{}
		s.absorb(need[i], ex)
	}
	s.cs.FanOut(rctx, len(need), func(i int) {
		p := need[i]
		mctx, cancel := p.m.within(rctx)
		defer cancel()
		exchanges[i] = s.c.get(mctx, client, p.m, p.m.cursorURL(p.cursor), s.cs, s.prefer)
	}, absorb, func(i int) {
		exchanges[i] = notSent(rctx, client)
		absorb(i)
	})
}

// absorb reads one member's answer into its position.
func (s *search) absorb(p *position, ex exchange) {
	if ex.call.Broken && ex.call.ClientGone && !ex.call.Expired {
		p.done = true // the client left: nothing is recorded, nothing answered
		return
	}
	p.asked = true
	p.record.ID = p.m.id
	p.record.DurationMS += millis(ex.duration)
	p.record.Status = ex.call.Status
	page := s.readPage(p, &ex)
	outcome := s.c.observe(p.m, ex.call)
	if p.record.Outcome == "" || p.record.Outcome == outbound.OK {
		p.record.Outcome = outcome
	}
	if page == nil {
		ex.body = boundedBody(ex.body)
		p.failure = &ex
		p.done = true
		return
	}
	s.load(p, page)
}

// readPage reads a member's 2xx answer as a searchset page, nil when there is none
// to use; an unusable one marks ex so, with the reason when it names a limit.
func (s *search) readPage(p *position, ex *exchange) *fhir.Page {
	var page *fhir.Page
	if !ex.call.Broken && !ex.call.Unusable && ex.call.Status >= 200 && ex.call.Status < 300 {
		pg, err := fhir.ScanPage(ex.body, s.cs.MaxEntries)
		var costly calllimit.TooCostly
		switch {
		case errors.As(err, &costly) || errors.Is(err, fhir.ErrTooManyEntries):
			ex.call.Unusable = true
			ex.reason = fmt.Sprintf("member %s answered HTTP %d, but %s", p.m.id, ex.call.Status, err.Error())
		case err != nil:
			s.c.log.V(1).Info("Member answered a body that is not a searchset", "member", p.m.id, "error", err.Error())
			ex.call.Unusable = true
		case s.extras+fhir.Extras(pg) > s.maxExtras:
			// Its includes and outcomes would take the page past max_answer_entries:
			// the member's part is left out whole, as any other unusable answer.
			ex.call.Unusable = true
			ex.reason = fmt.Sprintf("member %s answered HTTP %d, but its entries would take the page past limits.max_answer_entries", p.m.id, ex.call.Status)
		default:
			page = pg
		}
	}
	return page
}

// load takes the page a member answered into its position: its total on a first
// page, its entries rewritten (the matches past the offset, the rest kept for the
// page), and its next link as the position's next cursor.
func (s *search) load(p *position, page *fhir.Page) {
	p.answered = true
	if s.first && page.Self != "" {
		s.selfs = append(s.selfs, page.Self)
	}
	if s.first && p.total == nil {
		p.total = page.Total
		if page.Total != nil {
			p.remaining = *page.Total
		}
	}
	if p.ident == nil {
		p.ident = &identity.Rewriter{Member: p.m.id, Base: strings.TrimSuffix(p.m.base.String(), "/"), Route: s.gw + "/nodes/" + p.m.id + "/fhir", GW: s.gw}
	}
	matches := 0
	p.includes, p.orphans = nil, p.offset == 0
	for _, me := range page.Entry {
		e, kind := s.rewriteEntry(p, me)
		switch kind {
		case entryMatch:
			if matches >= p.offset {
				p.matches = append(p.matches, e)
			}
			matches++
		case entryInclude:
			p.includes = append(p.includes, identity.NewInclude(e.json, p.ident.Key(e.head)))
			s.extras++
		case entryOther:
			if p.offset == 0 {
				p.extra = append(p.extra, e.json)
				s.extras++
			}
		}
	}
	p.loaded = true
	p.next = ""
	if page.Next != "" && !s.summaryCount {
		if c, ok := cursorOf(p.m, page.Next); ok {
			p.next = c
		} else {
			s.c.log.V(1).Info("Member's next link is not under its base: its paging stops", "member", p.m.id)
			p.unlinked = true
		}
	}
	if p.remaining == 0 && (len(p.matches) > 0 || p.next != "") {
		p.remaining = -1 // its total was wrong: nothing is predicted of it any more
	} else if lost := p.remaining - len(p.matches); lost > 0 && p.next == "" && len(p.order.Frames) == 0 && !s.summaryCount {
		// Its total promises more than its last page holds: a first page's counts less.
		p.lost, p.remaining, p.total = p.lost+lost, len(p.matches), searchset.Less(p.total, lost)
	}
	if len(p.matches) == 0 {
		if p.loaded = false; p.next == "" || s.summaryCount {
			s.jump(p, p.order.End())
		} else {
			p.cursor, p.offset, p.next = p.next, 0, ""
		}
	}
}

// boundedBody keeps what an outcome entry may quote of a failed member's body.
func boundedBody(b []byte) []byte {
	const max = 64 << 10
	if len(b) > max {
		return nil
	}
	return b
}

type entryKind int

const (
	entryMatch   entryKind = iota
	entryInclude           // placed with the first match linked to it (identity.Attach)
	entryOther             // an outcome: passed on with the page that loaded it
	entryDropped
)

// rewriteEntry makes the gateway's entry of a member's, in the federated identity
// (identity.Rewriter.Entry), search.mode set (match when the member sent none). A
// member's OperationOutcome entry becomes one that names the member.
//
// The page was decoded once, its entries' resources kept as they came; only their
// type and id are read again here.
func (s *search) rewriteEntry(p *position, e fhir.Entry) (pageEntry, entryKind) {
	head, ok := fhir.ReadHead(e.Resource)
	if !ok {
		return pageEntry{}, entryDropped
	}
	mode := "match"
	if e.Search != nil && e.Search.Mode != "" {
		mode = e.Search.Mode
	}
	if head.ResourceType == "OperationOutcome" || mode == "outcome" {
		return pageEntry{json: searchset.MemberNote(p.m.id, s.memberIssues(p.m, e.Resource))}, entryOther
	}
	if mode != "match" && mode != "include" {
		mode = "match"
	}
	pe := pageEntry{head: head}
	var resource []byte
	pe.json, resource = p.ident.Entry(e, head, mode)
	if mode != "match" {
		return pe, entryInclude
	}
	if len(s.sort) > 0 {
		pe.keys = searchquery.SortValues(resource, s.sort)
	}
	return pe, entryMatch
}

// memberIssues reads the issues of a member's OperationOutcome, scrubbed of the
// member's address, at most maxIssues.
func (s *search) memberIssues(m *member, body []byte) []fhir.Issue {
	return memberIssues(m, s.gw, body)
}

const maxIssues = 20

func memberIssues(m *member, gw string, body []byte) []fhir.Issue {
	return fhir.ReadIssues(body, maxIssues, func(text string) string { return scrubMember(m, gw, text) })
}

// scrubMember is text a member wrote as a client may see it (proxy.ScrubBackend):
// the member's base becomes the gateway's route to it, its host "member {id}".
func scrubMember(m *member, gw, text string) string {
	return proxy.ScrubBackend(text, strings.TrimSuffix(m.base.String(), "/"), m.base.Host, gw+"/nodes/"+m.id+"/fhir", "member "+m.id)
}

// failureOf is what the page tells of p's failure (searchset.Failure).
func (s *search) failureOf(p *position) searchset.Failure {
	f := searchset.Failure{Member: p.m.id, Outcome: p.record.Outcome, Status: p.record.Status, Remaining: p.remaining}
	if p.failure != nil {
		f.Reason, f.Issues = p.failure.reason, s.memberIssues(p.m, p.failure.body)
	}
	return f
}

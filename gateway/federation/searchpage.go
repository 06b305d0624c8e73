package federation

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/ferrofed/ferrofed/gateway/auth"
	"github.com/ferrofed/ferrofed/gateway/bindings/audit"
	"github.com/ferrofed/ferrofed/gateway/calllimit"
	"github.com/ferrofed/ferrofed/gateway/fhir"
	"github.com/ferrofed/ferrofed/gateway/searchquery"
	"github.com/ferrofed/ferrofed/gateway/tracing"
)

// handleSearch answers one page of a federated search of resourceType with the raw
// query (or form) raw.
func (s *Surface) handleSearch(c *gin.Context, st *settings, resourceType, raw string) {
	raw, q, ok := s.readSearch(c, st, resourceType, raw)
	if !ok {
		return
	}
	r := c.Request
	gw := fhir.GatewayBase(r, st.cfg.Server.BasePath)
	prefer := r.Header.Values("Prefer")
	ctx := r.Context()
	srch := &search{c: s.caller, cs: s.newCalls(st, r.Header.Values("Via")), reg: st.reg, resourceType: resourceType, prefer: prefer, gw: gw,
		expires: time.Now().Add(st.fed.PageTokenTTL())}
	srch.caller, srch.operator = callerOf(c, st.key)
	if notes, ok := c.Get(fhir.NotesKey); ok { // the access guard's (a dropped _include)
		srch.flowEntries = notes.([][]byte)
	}
	var tokenTotal *int
	var self string
	// admitted is true once the request holds its place in the member-call queue.
	admitted := false
	if q.Page != "" {
		if tokenTotal, self, ok = continueSearch(c, st, srch, q, resourceType); !ok || !s.reconsent(c, srch) {
			return
		}
	} else {
		self = firstPage(st, srch, q, resourceType)
		var refused bool
		if q, refused = s.narrow(c, st, srch, q, resourceType); refused {
			return
		}
		if s.opts.Patient != nil {
			// A patient-scoped search is admitted by the fan-out it would have without
			// the flow, before the flow spends a binding call: a request the queue
			// sheds costs no exchange. What the flow drops is given back at once.
			all := len(srch.positions)
			release, ok := srch.cs.Lim.Admit(all)
			if !ok {
				calllimit.Shed(c.Writer, all, srch.cs.Lim)
				return
			}
			defer func() { release() }()
			// The flow and the fan-out share the request's budget: the fan-out gets
			// what the flow left.
			pctx, cancel := context.WithTimeout(ctx, st.requestTimeout)
			defer cancel()
			ctx = pctx
			if s.planPatient(ctx, c, st, srch, q, resourceType) {
				return
			}
			release = srch.cs.Lim.Keep(all, len(srch.positions))
			admitted = true
		}
	}
	srch.maxExtras = st.limits.MaxAnswerEntries - srch.count
	if !admitted {
		done, ok := srch.cs.Lim.Admit(len(srch.positions))
		if !ok {
			calllimit.Shed(c.Writer, len(srch.positions), srch.cs.Lim)
			return
		}
		defer done()
	}
	stored := s.auditing(c, st, audit.Search, resourceType, raw, positionIDs(srch.positions))
	res := srch.run(ctx, calllimit.Budget(ctx, st.requestTimeout), fhir.WantsStrict(prefer), st.key, tokenTotal)
	if errors.Is(ctx.Err(), context.Canceled) {
		return // the client left: nobody to answer.
	}
	if !stored() {
		return
	}
	if q.Page == "" {
		self = searchquery.UsedQuery(self, srch.selfs)
	}
	writePage(c.Writer, st, gw, resourceType, self, res)
}

// readSearch reads the search's query: a stored query (`_query`) expanded, then the
// parameters parsed. A query refused is answered here (ok false).
func (s *Surface) readSearch(c *gin.Context, st *settings, resourceType, raw string) (string, searchquery.Query, bool) {
	if x := s.opts.StoredQueries; x != nil {
		expanded, status, msg := x.Expand(resourceType, raw)
		if status != 0 {
			code := "invalid"
			if status == http.StatusNotFound {
				code = "not-found"
			}
			fhir.Write(c.Writer, status, fhir.ParamOutcome(code, "_query", msg))
			return "", searchquery.Query{}, false
		}
		raw = expanded
	}
	q, qerr := searchquery.Parse(resourceType, raw, st.fed.DefaultCount, st.fed.MaxCount, st.limits.MaxQueryBytes)
	if qerr != nil {
		fhir.Write(c.Writer, qerr.Status, qerr.Outcome)
		return "", q, false
	}
	return raw, q, true
}

// continueSearch sets srch up from the continuation token of q: the members' positions,
// in registry order. It returns the first page's total and the self link's query; a
// token refused is answered here (ok false).
func continueSearch(c *gin.Context, st *settings, srch *search, q searchquery.Query, resourceType string) (tokenTotal *int, self string, ok bool) {
	t, err := decodeToken(st.key, q.Page, st.reg, st.fed.MaxCount)
	if err == nil && t.Type != resourceType {
		err = searchquery.BadToken{Reason: "it continues a search of another resource type"}
	}
	if err == nil {
		err = t.For(srch.caller, time.Now())
	}
	if err != nil {
		searchquery.Refuse(c.Writer, err)
		return nil, "", false
	}
	tracing.Event(c.Request.Context(), tracing.EventPageToken) // never the token
	srch.count, srch.sortRaw, srch.consent = t.Count, t.Sort, t.Consent
	srch.sort, _ = searchquery.ParseSort(resourceType, t.Sort)
	for _, tm := range t.Members {
		p := &position{m: st.reg.byID[tm.ID], cursor: tm.Cursor, offset: tm.Offset, remaining: -1, order: tm.Order.Value()}
		if tm.Remaining != nil {
			p.remaining = *tm.Remaining
		}
		srch.positions = append(srch.positions, p)
	}
	// Positions are served in registry order, whatever order the token lists.
	sortPositions(st.reg, srch.positions)
	return t.Total, "_page=" + searchquery.EscapeQuery(q.Page), true
}

// callerOf is whom a search's next links are bound to: the page token key's hash of
// the verified token's issuer and subject (gateway/access), or of "anonymous"; and
// whether that token holds its issuer's operator scope.
func callerOf(c *gin.Context, key tokenKey) (string, bool) {
	if p := auth.PrincipalOf(c); p != nil {
		return key.Caller(p.Issuer, p.Subject), p.Operator
	}
	return key.Caller("", "anonymous"), false
}

// firstPage sets srch up for the first page of q: every member asked with the member
// query. It returns the self link's query.
func firstPage(st *settings, srch *search, q searchquery.Query, resourceType string) (self string) {
	srch.first = true
	srch.count, srch.sort, srch.sortRaw, srch.summaryCount = q.Count, q.Sort, q.SortRaw, q.SummaryCount
	mq := q.MemberQuery()
	cursor := "/" + resourceType
	if mq != "" {
		cursor += "?" + mq
	}
	for _, m := range st.reg.members {
		srch.positions = append(srch.positions, &position{m: m, cursor: cursor, remaining: -1})
	}
	return mq
}

// writePage answers the page res came to: its outcome, or the searchset Bundle with
// its self and next links under the gateway's base gw.
func writePage(w http.ResponseWriter, st *settings, gw, resourceType, self string, res pageResult) {
	if res.status != http.StatusOK {
		fhir.Write(w, res.status, res.outcome)
		return
	}
	selfURL := gw + "/fhir/" + resourceType
	if self != "" {
		selfURL += "?" + self
	}
	b := Bundle{LastUpdated: time.Now(), Records: res.records, Strict: st.fed.StrictFHIR, Total: res.total, Links: []fhir.Link{{Relation: "self", URL: selfURL}}, Entry: res.entries}
	if res.next != "" {
		b.Links = append(b.Links, fhir.Link{Relation: "next", URL: gw + "/fhir/" + resourceType + "?_page=" + res.next})
	}
	fhir.Write(w, http.StatusOK, b)
}

package federation

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/textproto"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// isHopByHop reports whether the canonical header name k describes one connection,
// not the message: a proxy must not pass those on (RFC 9110 §7.6.1), in either
// direction.
func isHopByHop(k string) bool {
	switch k {
	case "Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
		"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade":
		return true
	}
	return false
}

// clientCredentials are request headers that carry the client's credentials for the
// gateway. They are the gateway's to read, never a member's: forwarding a bearer
// token would let every member replay it against the gateway or its peers.
var clientCredentials = []string{"Authorization", "Cookie"}

// routedDrop are the request headers a routed request leaves behind: the client's
// credentials, and the forwarding headers a client could write itself (the gateway
// sets its own, setForwarded: a trusted proxy's chain is kept there, not here).
var routedDrop = []string{"Authorization", "Cookie", "Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto", "X-Forwarded-Prefix",
	"X-Real-Ip", "True-Client-Ip", "X-Client-Ip"}

// routedBase is where the client reached a member through the gateway, and what the
// routed call shares with the request.
type routedBase struct {
	// gateway is the gateway's base URL (scheme, host, server.base_path).
	gateway string
	// prefix is the member's FHIR API's path on the gateway: {base_path}/nodes/{id}/fhir.
	prefix string
	// calls are the request's call limits and Via.
	calls *calls
	// trusted are forwarding.trusted_proxies.
	trusted []netip.Prefix
}

// copyHeaders copies src into dst without the hop-by-hop headers (the fixed list, and
// any header src's Connection names) and without the headers listed in drop.
//
// It runs twice for every routed request, so it builds no set: the lists are short
// and scanned in place, and every copied value goes into one array allocated for all
// of them (each header's slice capped at its own values, so that appending to one
// never writes over the next).
func copyHeaders(dst, src http.Header, drop ...string) {
	// The headers src's Connection names, canonical: rarely more than one.
	var namedBuf [4]string
	named := namedBuf[:0]
	for _, v := range src["Connection"] {
		for f := range strings.SplitSeq(v, ",") {
			if f = textproto.TrimString(f); f != "" {
				named = append(named, textproto.CanonicalMIMEHeaderKey(f))
			}
		}
	}
	skip := func(k string) bool {
		k = textproto.CanonicalMIMEHeaderKey(k)
		if isHopByHop(k) || slices.Contains(named, k) {
			return true
		}
		for _, d := range drop {
			if textproto.CanonicalMIMEHeaderKey(d) == k {
				return true
			}
		}
		return false
	}
	// Room for every value, the few left behind included: counting only the copied
	// ones would mean asking skip twice per header.
	n := 0
	for _, vs := range src {
		n += len(vs)
	}
	values := make([]string, 0, n)
	for k, vs := range src {
		if skip(k) {
			continue
		}
		if len(vs) == 0 {
			dst[k] = dst[k][:0:0]
			continue
		}
		first := len(values)
		values = append(values, vs...)
		dst[k] = values[first:len(values):len(values)]
	}
}

// route sends the client's request to m and streams the answer back: status,
// headers (without hop-by-hop ones) and body, flushed as it arrives, so a large
// answer is neither held in memory nor delayed. It never answers the client itself
// once the member's status is known: a body that breaks off aborts the client's
// connection, so a truncated answer can never pass for a whole one.
//
// The member is told where the client reached it (X-Forwarded-Proto, -Host, -Prefix,
// -For and Forwarded), so that a member that builds its URLs from them builds the
// gateway's. For one that does not, URLs under the member's base in Location,
// Content-Location and a JSON body are rewritten to the gateway's /nodes/{id}/fhir.
func (c *caller) route(w http.ResponseWriter, r *http.Request, m *member, path string, budget time.Duration, rb routedBase) {
	deadline := time.Now().Add(budget)
	// The body comes before the slots (limits.max_routed_body_buffer_bytes): a body
	// that fits is read whole, a longer one up to the buffer, so that a client that
	// sends its body slowly, or never, holds none of the member's calls. One that does
	// not arrive in time, or breaks off, is the client's 408 or 400; the member was
	// never asked.
	var body *clientBody
	var outBody io.Reader
	length := r.ContentLength
	if r.ContentLength != 0 {
		prefix, whole, err := readPrefix(r.Body, r.ContentLength, rb.calls.bodyBuffer)
		if err != nil {
			// A client that half-closed its side cancels the request's context: it
			// may still read the answer.
			bodyFault(w, r.Context(), err)
			return
		}
		switch {
		case whole && len(prefix) == 0:
			length = 0
		case whole:
			outBody, length = bytes.NewReader(prefix), int64(len(prefix))
		default:
			body = &clientBody{r: r.Body}
			outBody = io.MultiReader(bytes.NewReader(prefix), body)
		}
	}
	// The member's budget starts once the body is in, within the request's.
	if m.timeout > 0 && time.Now().Add(m.timeout).Before(deadline) {
		deadline = time.Now().Add(m.timeout)
	}
	// The call waits for its slots (limits.max_member_calls, _per_member) at most
	// limits.member_call_wait_ms, and never so long that less than its least useful
	// budget (limits.min_member_call_ms) would be left: one that never gets them is
	// never sent and says nothing of the member.
	release, ok := rb.calls.slots(r.Context(), m.id, deadline, true, rb.calls.wait)
	if !ok {
		c.routeNotSent(w, r, m, rb.calls)
		return
	}
	defer release()
	ctx, cancel := context.WithDeadline(r.Context(), deadline)
	defer cancel()
	// The trace goes on the context before the request is built: adding it to a built
	// request would copy the request.
	tctx, sent := traceSent(ctx)
	start := time.Now()
	out, err := http.NewRequestWithContext(tctx, r.Method, m.url(path, r.URL.RawQuery), outBody)
	if err != nil {
		writeFHIR(w, http.StatusBadGateway, operationOutcome("exception", "the request cannot be sent to member "+m.id))
		return
	}
	copyHeaders(out.Header, r.Header, routedDrop...)
	setForwarded(out.Header, r, rb)
	out.Header["Via"] = append(out.Header["Via"], rb.calls.via[len(rb.calls.via)-1])
	out.ContentLength = length
	// Without a User-Agent of its own Go would send "Go-http-client"; an empty one
	// keeps the client's absent header absent.
	if _, ok := out.Header["User-Agent"]; !ok {
		out.Header["User-Agent"] = nil
	}

	res, err := c.client.Do(out)
	if err != nil {
		if body != nil && body.clientsFault(ctx, time.Since(start)) {
			// The client broke its upload or held it past the deadline: the member
			// did nothing wrong, its state stays; the member's connection went with
			// the failed request.
			clientFault(w, ctx, body)
			return
		}
		call := Call{
			Broken:     true,
			Expired:    errors.Is(ctx.Err(), context.DeadlineExceeded),
			ClientGone: errors.Is(r.Context().Err(), context.Canceled),
			NotSent:    !sent.Load(),
		}
		switch c.observe(m, call) {
		case Cancelled:
			// Nobody is listening; nothing to write.
		case Unreachable:
			if headTooLarge(err) {
				writeFHIR(w, http.StatusBadGateway, operationOutcome("transient", fmt.Sprintf("member %s answered with headers longer than %d KiB", m.id, MaxMemberHeaderBytes>>10)))
				break
			}
			writeFHIR(w, http.StatusBadGateway, operationOutcome("transient", "member "+m.id+" is unreachable"))
		case Timeout:
			writeFHIR(w, http.StatusGatewayTimeout, operationOutcome("timeout", "member "+m.id+" did not answer within the request budget"))
		default:
			writeFHIR(w, http.StatusBadGateway, operationOutcome("transient", "member "+m.id+" is unreachable"))
		}
		return
	}
	defer res.Body.Close()

	// The status line is the member's answer: record it before the body is passed
	// on, so the report is never behind what the client already saw. A body that
	// then breaks off is recorded again, as down.
	call := Call{Status: res.StatusCode}
	c.observe(m, call)
	if res.StatusCode < http.StatusOK {
		// Go's client passes on 101 Switching Protocols alone of the 1xx (100 and
		// 103 are read past). No client asked to switch: Upgrade is hop-by-hop and
		// never sent on, so a member's switch would hand the client a raw connection
		// it cannot read.
		writeFHIR(w, http.StatusBadGateway, operationOutcome("processing", fmt.Sprintf(
			"member %s answered HTTP %d, an interim answer to a request that asked for none", m.id, res.StatusCode)))
		return
	}
	// The gateway never passes a cookie to a member, so a member's cookie could only
	// confuse the client about whose it is.
	h := w.Header()
	copyHeaders(h, res.Header, "Set-Cookie")
	memberBase := strings.TrimSuffix(m.base.String(), "/")
	gwBase := rb.gateway + "/nodes/" + m.id + "/fhir"
	for _, k := range []string{"Location", "Content-Location"} {
		if v := h.Get(k); v != "" && strings.HasPrefix(v, memberBase) {
			h.Set(k, gwBase+v[len(memberBase):])
		}
	}
	var t streamTimes
	var readErr error
	if res.StatusCode >= http.StatusBadRequest && r.Method != http.MethodHead {
		// An error's body is the member's own text (a backend's address, a token in a
		// URL): only its OperationOutcome's issues go on, scrubbed.
		if err := routeError(w, res, m, rb.gateway); err != nil {
			call.Broken = true
			call.Expired = errors.Is(ctx.Err(), context.DeadlineExceeded)
			call.ClientGone = errors.Is(r.Context().Err(), context.Canceled)
			c.observe(m, call)
		}
		return
	}
	if rewritable(res) {
		readErr = rewriteBody(w, res, []byte(memberBase), []byte(gwBase), &t)
	} else {
		w.WriteHeader(res.StatusCode)
		// A client that goes away mid-body (the write fails) only stops the copy.
		readErr = stream(w, res.Body, nil, &t)
	}
	if readErr != nil {
		call.Broken = true
		call.Expired = errors.Is(ctx.Err(), context.DeadlineExceeded)
		call.ClientGone = errors.Is(r.Context().Err(), context.Canceled)
		// A budget spent mostly waiting for the client to take the bytes is the
		// client's: the member kept its state.
		if !call.Expired || t.writing < t.reading {
			c.observe(m, call)
		}
		abort(w)
	}
}

// maxRoutedOutcome is the most of a member's error answer that is read: a longer one
// is passed on as the gateway's own outcome.
const maxRoutedOutcome = 64 << 10

// routeError answers a routed request the member answered with an error (4xx, 5xx):
// the member's status and headers (their values through scrubMember), and its
// OperationOutcome's issues as a federated page carries them (severity and code checked, texts through scrubMember, gateway/scrub), or,
// when the body is no such OperationOutcome (empty, HTML, compressed, longer than
// maxRoutedOutcome), the gateway's own outcome naming the member and the status. A
// body that breaks off before its end is a 502 and the read's error.
func routeError(w http.ResponseWriter, res *http.Response, m *member, gw string) error {
	body, err := io.ReadAll(io.LimitReader(res.Body, maxRoutedOutcome+1))
	h := w.Header()
	for _, k := range []string{"Content-Encoding", "Content-Length", "Content-Location", "Content-Range", "Etag", "Last-Modified", "Location"} {
		h.Del(k)
	}
	// Its headers are the member's text too (a WWW-Authenticate realm, a server's
	// name and address).
	for k, vs := range h {
		for i, v := range vs {
			vs[i] = scrubMember(m, gw, v)
		}
		h[k] = vs
	}
	if err != nil {
		writeFHIR(w, http.StatusBadGateway, operationOutcome("transient", fmt.Sprintf("member %s broke its answer off (HTTP %d)", m.id, res.StatusCode)))
		return err
	}
	var issues []Issue
	if ce := res.Header.Get("Content-Encoding"); len(body) <= maxRoutedOutcome && (ce == "" || ce == "identity") {
		issues = memberIssues(m, gw, body)
	}
	if len(issues) == 0 {
		issues = []Issue{{Severity: "error", Code: routedErrorCode(res.StatusCode),
			Diagnostics: fmt.Sprintf("member %s answered HTTP %d", m.id, res.StatusCode)}}
	}
	writeFHIR(w, res.StatusCode, OperationOutcome{ResourceType: "OperationOutcome", Issue: issues})
	return nil
}

// routedErrorCode is the IssueType of a member's error status.
func routedErrorCode(status int) string {
	switch status {
	case http.StatusUnauthorized:
		return "login"
	case http.StatusForbidden:
		return "forbidden"
	case http.StatusNotFound, http.StatusGone:
		return "not-found"
	case http.StatusRequestTimeout, http.StatusGatewayTimeout:
		return "timeout"
	case http.StatusTooManyRequests:
		return "throttled"
	}
	if status >= 500 {
		return "transient"
	}
	return "processing"
}

// routeNotSent answers a routed request whose call never got its slots in time: 503
// with Retry-After, the member never asked and its state unchanged.
func (c *caller) routeNotSent(w http.ResponseWriter, r *http.Request, m *member, cs *calls) {
	if errors.Is(r.Context().Err(), context.Canceled) {
		return // the client left
	}
	w.Header().Set("Retry-After", ShedRetryAfter)
	writeFHIR(w, http.StatusServiceUnavailable, operationOutcome("throttled", fmt.Sprintf(
		"member %s was not asked: the gateway's calls to it (limits.max_member_calls, limits.max_member_calls_per_member) stayed busy for limits.member_call_wait_ms (%d ms), or for as long as leaves the call limits.min_member_call_ms (%d ms): retry after %s s",
		m.id, cs.wait.Milliseconds(), cs.minCall.Milliseconds(), ShedRetryAfter)))
}

// readPrefix reads a routed request's body before its call takes a slot: the whole
// body when it is at most limit bytes (whole), else its first limit bytes (known
// length) or limit+1 (chunked). length is the request's Content-Length, -1 unknown.
// The buffer grows as the bytes arrive: a head that announces a length holds nothing.
func readPrefix(body io.Reader, length, limit int64) (prefix []byte, whole bool, err error) {
	if length > 0 {
		n := min(length, limit)
		prefix, err = io.ReadAll(io.LimitReader(body, n))
		if err == nil && int64(len(prefix)) < n {
			err = io.ErrUnexpectedEOF
		}
		if err != nil {
			return nil, false, err
		}
		return prefix, n == length, nil
	}
	prefix, err = io.ReadAll(io.LimitReader(body, limit+1))
	if err != nil {
		return nil, false, err
	}
	return prefix, int64(len(prefix)) <= limit, nil
}

// clientBody is the client's request body as the transport reads it to send it on.
// It remembers how reading it went, so that a client's broken or late upload is never
// taken for the member's failure.
type clientBody struct {
	r io.Reader
	// waited is how long Reads waited for the client, in total; reading is when the
	// Read in progress began (Unix ns), 0 when none is: a Read the transport is still
	// blocked in when the call fails counts too.
	waited, reading atomic.Int64
	// done is set once the body was read to its end.
	done atomic.Bool
	// failed is set once a Read failed with more than io.EOF; err is that error.
	failed atomic.Bool
	err    error
}

func (b *clientBody) Read(p []byte) (int, error) {
	start := time.Now()
	b.reading.Store(start.UnixNano())
	n, err := b.r.Read(p)
	b.waited.Add(int64(time.Since(start)))
	b.reading.Store(0)
	switch {
	case errors.Is(err, io.EOF):
		b.done.Store(true)
	case err != nil && !b.failed.Load():
		b.err = err
		b.failed.Store(true)
	}
	return n, err
}

// clientsFault reports, once a call that ran for elapsed failed, whether the client
// was the cause: its body failed to read (a malformed chunk size, a connection cut
// mid-body, the connection's read deadline), or the budget ran out before the body
// had all come, most of the call spent waiting for it. A member that stops reading a
// large body holds the gateway in its writes, not in these reads: that is the
// member's failure.
func (b *clientBody) clientsFault(ctx context.Context, elapsed time.Duration) bool {
	if b.failed.Load() {
		return true
	}
	waited := time.Duration(b.waited.Load())
	if since := b.reading.Load(); since != 0 {
		waited += time.Since(time.Unix(0, since))
	}
	return !b.done.Load() && errors.Is(ctx.Err(), context.DeadlineExceeded) && 2*waited > elapsed
}

// clientFault answers a request whose body the client broke or held up: 408 when it
// did not arrive in time, 400 when it could not be read. The connection is closed
// after: the rest of the body is never read.
func clientFault(w http.ResponseWriter, ctx context.Context, b *clientBody) {
	var err error
	if b.failed.Load() {
		err = b.err
	}
	bodyFault(w, ctx, err)
}

// bodyFault answers a request whose body failed to read with err (nil: it was still
// coming when ctx ended), as clientFault.
func bodyFault(w http.ResponseWriter, ctx context.Context, err error) {
	w.Header().Set("Connection", "close")
	if (err == nil && errors.Is(ctx.Err(), context.DeadlineExceeded)) || bodyTimedOut(ctx, err) {
		writeFHIR(w, http.StatusRequestTimeout, operationOutcome("timeout", "the request body did not arrive within server.request_timeout_ms"))
		return
	}
	writeFHIR(w, http.StatusBadRequest, operationOutcome("invalid", "the request body could not be read: it is malformed or was cut off"))
}

// bodyTimedOut reports whether reading a client's body failed on the request's
// deadline (the connection's read deadline, or the context's).
func bodyTimedOut(ctx context.Context, err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) ||
		(err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded))
}

// streamTimes is how long a routed answer's copy spent reading the member and
// writing to the client.
type streamTimes struct{ reading, writing time.Duration }

// streamBuffers are stream's copy buffers. A buffer made per routed request was 32
// KiB of garbage each time: most of what the gateway allocated on that path, and the
// garbage collector's work that came with it.
var streamBuffers = sync.Pool{New: func() any { b := make([]byte, 32*1024); return &b }}

// stream copies body to w, flushing after every read so that the client sees the
// member's bytes as soon as the gateway has them. It returns the member's side
// failing; the client's side failing just stops the copy.
//
// The read that ends the body is not flushed: the handler returns right after it and
// the server writes what is left at once, in the same write as the end of a chunked
// body rather than in one of its own.
//
// With rw set, the bytes go through it first (the member's base rewritten).
func stream(w http.ResponseWriter, body io.Reader, rw *rewriter, t *streamTimes) (readErr error) {
	var rc *http.ResponseController // made at the first flush: a small answer has none
	bp := streamBuffers.Get().(*[]byte)
	defer streamBuffers.Put(bp)
	buf := *bp
	for {
		start := time.Now()
		n, err := body.Read(buf)
		read := time.Now()
		t.reading += read.Sub(start)
		if n > 0 {
			out := buf[:n]
			if rw != nil {
				out = rw.process(out, false)
			}
			if _, werr := w.Write(out); werr != nil {
				return nil
			}
			if !errors.Is(err, io.EOF) {
				if rc == nil {
					rc = http.NewResponseController(w)
				}
				if ferr := rc.Flush(); ferr != nil && !errors.Is(ferr, http.ErrNotSupported) {
					return nil
				}
			}
			t.writing += time.Since(read)
		}
		if errors.Is(err, io.EOF) {
			if rw != nil {
				if rest := rw.process(nil, true); len(rest) > 0 {
					w.Write(rest) //nolint:errcheck // the client may be gone.
				}
			}
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// setForwarded tells the member where the client reached it: the gateway's scheme
// and host, the member's FHIR API's path on the gateway, and who the client is: the
// connection's peer, appended to the X-Forwarded-For and Forwarded chains the peer
// sent when it is a trusted proxy (forwarding.trusted_proxies); from any other peer
// those chains were dropped (routedDrop) and start at the peer. X-Real-IP is the
// client as far as the gateway can tell: the peer, or past trusted proxies the last
// address they name that is not one of them.
func setForwarded(h http.Header, r *http.Request, rb routedBase) {
	proto := "http"
	if r.TLS != nil {
		proto = "https"
	}
	h["X-Forwarded-Proto"] = []string{proto}
	h["X-Forwarded-Host"] = []string{r.Host}
	h["X-Forwarded-Prefix"] = []string{rb.prefix}
	fwd := "proto=" + proto + ";host=" + quoteForwarded(r.Host)
	ip, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		h["Forwarded"] = []string{fwd}
		return
	}
	var xff, forwarded []string
	client := ip
	if peer, err := netip.ParseAddr(ip); err == nil && trusts(rb.trusted, peer) {
		xff = r.Header.Values("X-Forwarded-For")
		forwarded = r.Header.Values("Forwarded")
		client = clientBehind(xff, rb.trusted, ip)
	}
	h["X-Forwarded-For"] = []string{strings.Join(append(xff[:len(xff):len(xff)], ip), ", ")}
	h["X-Real-Ip"] = []string{client}
	if strings.Contains(ip, ":") {
		ip = "[" + ip + "]"
	}
	fwd = "for=" + quoteForwarded(ip) + ";" + fwd
	h["Forwarded"] = []string{strings.Join(append(forwarded[:len(forwarded):len(forwarded)], fwd), ", ")}
}

func trusts(trusted []netip.Prefix, a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// clientBehind is the client a trusted peer forwarded for: walking X-Forwarded-For
// from the right (the hop nearest the gateway), the first address that is not a
// trusted proxy. A chain of trusted proxies alone is the peer's own request.
func clientBehind(xff []string, trusted []netip.Prefix, peer string) string {
	client := peer
	var hops []string
	for _, v := range xff {
		for f := range strings.SplitSeq(v, ",") {
			hops = append(hops, strings.TrimSpace(f))
		}
	}
	for i := len(hops) - 1; i >= 0; i-- {
		a, err := netip.ParseAddr(hops[i])
		if err != nil {
			return client // a hop that is no address: trust stops before it
		}
		client = a.String()
		if !trusts(trusted, a) {
			return client
		}
	}
	return client
}

// quoteForwarded quotes a Forwarded value unless it is a plain token (RFC 7239 §4).
func quoteForwarded(v string) string {
	for i := 0; i < len(v); i++ {
		c := v[i]
		if (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (c < '0' || c > '9') && strings.IndexByte("!#$%&'*+-.^_`|~", c) < 0 {
			return strconv.Quote(v)
		}
	}
	return v
}

// rewritable reports whether a routed answer's body is JSON the gateway may rewrite:
// FHIR JSON or JSON, not compressed.
func rewritable(res *http.Response) bool {
	if ce := res.Header.Get("Content-Encoding"); ce != "" && ce != "identity" {
		return false
	}
	ct := res.Header.Get("Content-Type")
	mt, _, _ := strings.Cut(ct, ";")
	mt = strings.TrimSpace(strings.ToLower(mt))
	return mt == FHIRJSON || mt == "application/json" || mt == "application/json+fhir"
}

// maxBufferedRewrite is the largest answer of known length that is rewritten in one
// buffer and sent with its new length; a larger one, or one of unknown length, is
// streamed through the rewriter (chunked, each part flushed as it comes).
const maxBufferedRewrite = 64 << 10

// rewriteBody passes a JSON answer on with every occurrence of old (the member's
// base) replaced by new (the gateway's route to it).
func rewriteBody(w http.ResponseWriter, res *http.Response, old, new []byte, t *streamTimes) error {
	if n := res.ContentLength; n >= 0 && n <= maxBufferedRewrite {
		body, err := readBody(res, n)
		if err != nil {
			return err
		}
		if int64(len(body)) > n {
			// Longer than announced: the transport does not let that happen.
			return io.ErrUnexpectedEOF
		}
		if bytes.Contains(body, old) {
			body = bytes.ReplaceAll(body, old, new)
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(res.StatusCode)
		w.Write(body) //nolint:errcheck // the client may be gone.
		return nil
	}
	w.Header().Del("Content-Length")
	w.WriteHeader(res.StatusCode)
	return stream(w, res.Body, &rewriter{old: old, new: new}, t)
}

// rewriter replaces old with new in a stream. Between parts it holds back only the
// end of what it saw that may begin an old still to come, so that an answer whose
// parts are not the member's base is passed on as soon as it arrives.
type rewriter struct {
	old, new []byte
	held     []byte
	out      []byte
}

// process returns what may be sent of the stream with part added; final flushes all.
func (rw *rewriter) process(part []byte, final bool) []byte {
	data := part
	if len(rw.held) > 0 {
		data = append(rw.held, part...)
	}
	out := rw.out[:0]
	i := 0
	for {
		j := bytes.Index(data[i:], rw.old)
		if j < 0 {
			break
		}
		out = append(out, data[i:i+j]...)
		out = append(out, rw.new...)
		i += j + len(rw.old)
	}
	rest := data[i:]
	k := 0
	if !final {
		for k = min(len(rw.old)-1, len(rest)); k > 0; k-- {
			if bytes.HasPrefix(rw.old, rest[len(rest)-k:]) {
				break
			}
		}
	}
	out = append(out, rest[:len(rest)-k]...)
	rw.held = append(rw.held[:0], rest[len(rest)-k:]...)
	rw.out = out
	return out
}

// abort breaks the client's connection off after a partial answer. Hijacking and
// closing is the one way that works under middleware that recovers panics (gin's
// Recovery swallows http.ErrAbortHandler, and the server would then end a chunked
// body cleanly, passing a truncated answer for a whole one). Where hijacking is not
// possible (HTTP/2), the panic is the server's own way to reset the stream.
func abort(w http.ResponseWriter) {
	if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
		conn.Close()
		return
	}
	panic(http.ErrAbortHandler)
}

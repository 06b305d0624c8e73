package federation

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/textproto"
	"slices"
	"strconv"
	"strings"
	"sync"
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
// sets its own).
var routedDrop = []string{"Authorization", "Cookie", "Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto", "X-Forwarded-Prefix"}

// routedBase is where the client reached a member through the gateway.
type routedBase struct {
	// gateway is the gateway's base URL (scheme, host, server.base_path).
	gateway string
	// prefix is the member's FHIR API's path on the gateway: {base_path}/nodes/{id}/fhir.
	prefix string
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
	if m.timeout > 0 && m.timeout < budget {
		budget = m.timeout
	}
	ctx, cancel := context.WithTimeout(r.Context(), budget)
	defer cancel()
	// The trace goes on the context before the request is built: adding it to a built
	// request would copy the request.
	tctx, sent := traceSent(ctx)
	out, err := http.NewRequestWithContext(tctx, r.Method, m.url(path, r.URL.RawQuery), r.Body)
	if err != nil {
		writeFHIR(w, http.StatusBadGateway, operationOutcome("exception", "the request cannot be sent to member "+m.id))
		return
	}
	copyHeaders(out.Header, r.Header, routedDrop...)
	setForwarded(out.Header, r, rb)
	out.ContentLength = r.ContentLength
	if r.ContentLength == 0 {
		out.Body = nil
	}
	// Without a User-Agent of its own Go would send "Go-http-client"; an empty one
	// keeps the client's absent header absent.
	if _, ok := out.Header["User-Agent"]; !ok {
		out.Header["User-Agent"] = nil
	}

	res, err := c.client.Do(out)
	if err != nil {
		call := Call{
			Broken:     true,
			Expired:    errors.Is(ctx.Err(), context.DeadlineExceeded),
			ClientGone: errors.Is(r.Context().Err(), context.Canceled),
			NotSent:    !sent.Load(),
		}
		switch c.observe(m, call) {
		case Cancelled:
			// Nobody is listening; nothing to write.
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
	var readErr error
	if rewritable(res) {
		readErr = rewriteBody(w, res, []byte(memberBase), []byte(gwBase))
	} else {
		w.WriteHeader(res.StatusCode)
		// A client that goes away mid-body (the write fails) only stops the copy.
		readErr = stream(w, res.Body, nil)
	}
	if readErr != nil {
		call.Broken = true
		call.Expired = errors.Is(ctx.Err(), context.DeadlineExceeded)
		call.ClientGone = errors.Is(r.Context().Err(), context.Canceled)
		c.observe(m, call)
		abort(w)
	}
}

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
func stream(w http.ResponseWriter, body io.Reader, rw *rewriter) (readErr error) {
	var rc *http.ResponseController // made at the first flush: a small answer has none
	bp := streamBuffers.Get().(*[]byte)
	defer streamBuffers.Put(bp)
	buf := *bp
	for {
		n, err := body.Read(buf)
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
// and host, and the member's FHIR API's path on the gateway.
func setForwarded(h http.Header, r *http.Request, rb routedBase) {
	proto := "http"
	if r.TLS != nil {
		proto = "https"
	}
	h["X-Forwarded-Proto"] = []string{proto}
	h["X-Forwarded-Host"] = []string{r.Host}
	h["X-Forwarded-Prefix"] = []string{rb.prefix}
	fwd := "proto=" + proto + ";host=" + quoteForwarded(r.Host)
	if ip, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		h["X-Forwarded-For"] = []string{ip}
		if strings.Contains(ip, ":") {
			ip = "[" + ip + "]"
		}
		fwd = "for=" + quoteForwarded(ip) + ";" + fwd
	}
	h["Forwarded"] = []string{fwd}
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
func rewriteBody(w http.ResponseWriter, res *http.Response, old, new []byte) error {
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
	return stream(w, res.Body, &rewriter{old: old, new: new})
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

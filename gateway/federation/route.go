package federation

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/textproto"
	"slices"
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

// routedPath checks the path a client asked for under {base}/nodes/{id}/fhir and
// returns it as it is sent under the member's FHIR API. A dot segment is refused: it
// would walk the member's URL out of its FHIR API (../admin), and a member's own path
// cleaning is not ours to rely on.
func routedPath(p string) (string, bool) {
	if p == "" {
		p = "/"
	}
	if !strings.HasPrefix(p, "/") {
		return "", false
	}
	for _, seg := range strings.Split(p[1:], "/") {
		if seg == "." || seg == ".." {
			return "", false
		}
	}
	if p == "/" {
		return "", true
	}
	return p, true
}

// route sends the client's request to m and streams the answer back: status,
// headers (without hop-by-hop ones) and body, flushed as it arrives, so a large
// answer is neither held in memory nor delayed. It never answers the client itself
// once the member's status is known: a body that breaks off aborts the client's
// connection, so a truncated answer can never pass for a whole one.
func (c *caller) route(w http.ResponseWriter, r *http.Request, m *member, path string, budget time.Duration) {
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
	copyHeaders(out.Header, r.Header, clientCredentials...)
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
	copyHeaders(w.Header(), res.Header, "Set-Cookie")
	w.WriteHeader(res.StatusCode)
	// A client that goes away mid-body (the write fails) only stops the copy.
	if readErr := stream(w, res.Body); readErr != nil {
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
func stream(w http.ResponseWriter, body io.Reader) (readErr error) {
	var rc *http.ResponseController // made at the first flush: a small answer has none
	bp := streamBuffers.Get().(*[]byte)
	defer streamBuffers.Put(bp)
	buf := *bp
	for {
		n, err := body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
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
			return nil
		}
		if err != nil {
			return err
		}
	}
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

// Package proxy is how the gateway passes a client's request on to one backend and
// its answer back, whoever the backend is: the path rule (no dot segment, however
// hidden), the headers a proxy must not pass (hop-by-hop, the client's credentials),
// the forwarding headers, the client's body read before a call is given a slot, and
// the answer streamed back (rewritten, flushed as it comes, aborted when it breaks
// off). It knows nothing of members or limits: gateway/federation routes with it
// (docs/data-plane.md).
package proxy

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"encoding/hex"
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

	"github.com/ferrofed/ferrofed/gateway/fhir"
	"github.com/ferrofed/ferrofed/gateway/scrub"
)

// NewClientBody wraps a client's request body as the transport reads it.
func NewClientBody(r io.Reader) *ClientBody { return &ClientBody{r: r} }

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

// ClientCredentials are request headers that carry the client's credentials for the
// gateway. They are the gateway's to read, never a member's: forwarding a bearer
// token would let every member replay it against the gateway or its peers.
var ClientCredentials = []string{"Authorization", "Cookie"}

// RoutedDrop are the request headers a routed request leaves behind: the client's
// credentials, and the forwarding headers a client could write itself (the gateway
// sets its own, SetForwarded: a trusted proxy's chain is kept there, not here).
var RoutedDrop = []string{"Authorization", "Cookie", "Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto", "X-Forwarded-Prefix",
	"X-Real-Ip", "True-Client-Ip", "X-Client-Ip"}

// CopyHeaders copies src into dst without the hop-by-hop headers (the fixed list, and
// any header src's Connection names) and without the headers listed in drop.
//
// It runs twice for every routed request, so it builds no set: the lists are short
// and scanned in place, and every copied value goes into one array allocated for all
// of them (each header's slice capped at its own values, so that appending to one
// never writes over the next).
func CopyHeaders(dst, src http.Header, drop ...string) {
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

// ReadPrefix reads a routed request's body before its call takes a slot: the whole
// body when it is at most limit bytes (whole), else its first limit bytes (known
// length) or limit+1 (chunked). length is the request's Content-Length, -1 unknown.
// The buffer grows as the bytes arrive: a head that announces a length holds nothing.
func ReadPrefix(body io.Reader, length, limit int64) (prefix []byte, whole bool, err error) {
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

// ClientBody is the client's request body as the transport reads it to send it on.
// It remembers how reading it went, so that a client's broken or late upload is never
// taken for the member's failure.
type ClientBody struct {
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

func (b *ClientBody) Read(p []byte) (int, error) {
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

// ClientsFault reports, once a call that ran for elapsed failed, whether the client
// was the cause: its body failed to read (a malformed chunk size, a connection cut
// mid-body, the connection's read deadline), or the budget ran out before the body
// had all come, most of the call spent waiting for it. A member that stops reading a
// large body holds the gateway in its writes, not in these reads: that is the
// member's failure.
func (b *ClientBody) ClientsFault(ctx context.Context, elapsed time.Duration) bool {
	if b.failed.Load() {
		return true
	}
	waited := time.Duration(b.waited.Load())
	if since := b.reading.Load(); since != 0 {
		waited += time.Since(time.Unix(0, since))
	}
	return !b.done.Load() && errors.Is(ctx.Err(), context.DeadlineExceeded) && 2*waited > elapsed
}

// ClientFault answers a request whose body the client broke or held up: 408 when it
// did not arrive in time, 400 when it could not be read. The connection is closed
// after: the rest of the body is never read.
func ClientFault(w http.ResponseWriter, ctx context.Context, b *ClientBody) {
	var err error
	if b.failed.Load() {
		err = b.err
	}
	BodyFault(w, ctx, err)
}

// BodyFault answers a request whose body failed to read with err (nil: it was still
// coming when ctx ended), as ClientFault.
func BodyFault(w http.ResponseWriter, ctx context.Context, err error) {
	w.Header().Set("Connection", "close")
	if (err == nil && errors.Is(ctx.Err(), context.DeadlineExceeded)) || BodyTimedOut(ctx, err) {
		fhir.Write(w, http.StatusRequestTimeout, fhir.Outcome("timeout", "the request body did not arrive within server.request_timeout_ms"))
		return
	}
	fhir.Write(w, http.StatusBadRequest, fhir.Outcome("invalid", "the request body could not be read: it is malformed or was cut off"))
}

// BodyTimedOut reports whether reading a client's body failed on the request's
// deadline (the connection's read deadline, or the context's).
func BodyTimedOut(ctx context.Context, err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) ||
		(err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded))
}

// StreamTimes is how long a routed answer's copy spent reading the member and
// writing to the client.
type StreamTimes struct{ Reading, Writing time.Duration }

// streamBuffers are Stream's copy buffers. A buffer made per routed request was 32
// KiB of garbage each time: most of what the gateway allocated on that path, and the
// garbage collector's work that came with it.
var streamBuffers = sync.Pool{New: func() any { b := make([]byte, 32*1024); return &b }}

// Stream copies body to w, flushing after every read so that the client sees the
// member's bytes as soon as the gateway has them. It returns the member's side
// failing; the client's side failing just stops the copy.
//
// The read that ends the body is not flushed: the handler returns right after it and
// the server writes what is left at once, in the same write as the end of a chunked
// body rather than in one of its own.
//
// With rw set, the bytes go through it first (the member's base rewritten).
func Stream(w http.ResponseWriter, body io.Reader, rw *rewriter, t *StreamTimes) (readErr error) {
	var rc *http.ResponseController // made at the first flush: a small answer has none
	bp := streamBuffers.Get().(*[]byte)
	defer streamBuffers.Put(bp)
	buf := *bp
	for {
		start := time.Now()
		n, err := body.Read(buf)
		read := time.Now()
		t.Reading += read.Sub(start)
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
			t.Writing += time.Since(read)
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

// SetForwarded tells the member where the client reached it: the gateway's scheme
// and host, the member's FHIR API's path on the gateway, and who the client is: the
// connection's peer, appended to the X-Forwarded-For and Forwarded chains the peer
// sent when it is a trusted proxy (forwarding.trusted_proxies); from any other peer
// those chains were dropped (RoutedDrop) and start at the peer. X-Real-IP is the
// client as far as the gateway can tell: the peer, or past trusted proxies the last
// address they name that is not one of them.
func SetForwarded(h http.Header, r *http.Request, prefix string, trusted []netip.Prefix) {
	proto := "http"
	if r.TLS != nil {
		proto = "https"
	}
	h["X-Forwarded-Proto"] = []string{proto}
	h["X-Forwarded-Host"] = []string{r.Host}
	h["X-Forwarded-Prefix"] = []string{prefix}
	fwd := "proto=" + proto + ";host=" + quoteForwarded(r.Host)
	ip, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		h["Forwarded"] = []string{fwd}
		return
	}
	var xff, forwarded []string
	client := ip
	if peer, err := netip.ParseAddr(ip); err == nil && trusts(trusted, peer) {
		xff = r.Header.Values("X-Forwarded-For")
		forwarded = r.Header.Values("Forwarded")
		client = clientBehind(xff, trusted, ip)
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

// Rewritable reports whether a routed answer's body is JSON the gateway may rewrite:
// FHIR JSON or JSON, not compressed.
func Rewritable(res *http.Response) bool {
	if ce := res.Header.Get("Content-Encoding"); ce != "" && ce != "identity" {
		return false
	}
	ct := res.Header.Get("Content-Type")
	mt, _, _ := strings.Cut(ct, ";")
	mt = strings.TrimSpace(strings.ToLower(mt))
	return mt == fhir.MediaType || mt == "application/json" || mt == "application/json+fhir"
}

// maxBufferedRewrite is the largest answer of known length that is rewritten in one
// buffer and sent with its new length; a larger one, or one of unknown length, is
// streamed through the rewriter (chunked, each part flushed as it comes).
const maxBufferedRewrite = 64 << 10

// rewriteBody passes a JSON answer on with every occurrence of the backend's base
// replaced by its route, gzipped when gz. An answer whose JSON document never ends is
// cut off: before its head is sent, the gateway's 502; after, abort. A body that
// fails to read is err, and abort.
func rewriteBody(w http.ResponseWriter, res *http.Response, b Backend, gz bool, t *StreamTimes) (abort bool, err error) {
	old, new := []byte(b.Base), []byte(b.Route)
	h := w.Header()
	if n := res.ContentLength; n >= 0 && n <= maxBufferedRewrite {
		body, err := ReadBody(res, n)
		if err == nil && int64(len(body)) > n {
			// Longer than announced: the transport does not let that happen.
			err = io.ErrUnexpectedEOF
		}
		if err != nil {
			return true, err
		}
		var depth jsonDepth
		if depth.feed(body); !depth.whole() {
			cutOff(w, b, res.StatusCode)
			return false, nil
		}
		if bytes.Contains(body, old) {
			body = bytes.ReplaceAll(body, old, new)
		}
		if gz && len(body) >= minGzip {
			body = gzipped(body)
			h.Set("Content-Encoding", "gzip")
		}
		h.Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(res.StatusCode)
		w.Write(body) //nolint:errcheck // the client may be gone.
		return false, nil
	}
	h.Del("Content-Length")
	rw := &rewriter{old: old, new: new}
	out := w
	var zw *gzip.Writer
	if gz {
		h.Set("Content-Encoding", "gzip")
		zw = gzipWriters.Get().(*gzip.Writer)
		defer gzipWriters.Put(zw)
		zw.Reset(w)
		out = &gzipResponse{ResponseWriter: w, zw: zw}
	}
	w.WriteHeader(res.StatusCode)
	if err := Stream(out, res.Body, rw, t); err != nil {
		return true, err
	}
	if !rw.depth.whole() {
		return true, nil
	}
	if zw != nil {
		zw.Close() //nolint:errcheck // the client may be gone.
	}
	return false, nil
}

// gzipped is body gzipped at BestSpeed.
func gzipped(body []byte) []byte {
	var buf bytes.Buffer
	buf.Grow(len(body)/4 + 64)
	zw := gzipWriters.Get().(*gzip.Writer)
	defer gzipWriters.Put(zw)
	zw.Reset(&buf)
	zw.Write(body) //nolint:errcheck // a bytes.Buffer does not fail.
	zw.Close()     //nolint:errcheck // idem.
	return buf.Bytes()
}

// rewriter replaces old with new in a Stream. Between parts it holds back only the
// end of what it saw that may begin an old still to come, so that an answer whose
// parts are not the member's base is passed on as soon as it arrives.
type rewriter struct {
	old, new []byte
	held     []byte
	data     []byte
	out      []byte
	// depth follows the answer's JSON as it passes, to tell a whole one.
	depth jsonDepth
}

// process returns what may be sent of the Stream with part added; final flushes all.
func (rw *rewriter) process(part []byte, final bool) []byte {
	rw.depth.feed(part)
	data := part
	if len(rw.held) > 0 {
		// Joined in a buffer of the rewriter's own, reused: held's array is only as
		// large as the base, so appending to it took a new array of a part's size.
		rw.data = append(append(rw.data[:0], rw.held...), part...)
		data = rw.data
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

// Abort breaks the client's connection off after a partial answer. Hijacking and
// closing is the one way that works under middleware that recovers panics (gin's
// Recovery swallows http.ErrAbortHandler, and the server would then end a chunked
// body cleanly, passing a truncated answer for a whole one). Where hijacking is not
// possible (HTTP/2), the panic is the server's own way to reset the Stream.
func Abort(w http.ResponseWriter) {
	if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
		conn.Close()
		return
	}
	panic(http.ErrAbortHandler)
}

// ReadBody reads at most max+1 bytes of res's body: one more than a usable answer may
// have, so that a larger one shows. An answer that says its length is read into one
// buffer of that size, not into one grown (and copied) a few times on the way.
func ReadBody(res *http.Response, max int64) ([]byte, error) {
	r := io.LimitReader(res.Body, max+1)
	n := res.ContentLength
	if n < 0 || n > max {
		return io.ReadAll(r)
	}
	// One byte more than announced, to see the end without growing the buffer.
	buf := make([]byte, 0, n+1)
	for {
		m, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+m]
		if errors.Is(err, io.EOF) {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
		if len(buf) == cap(buf) {
			// Longer than announced (the transport does not let that happen): read the
			// rest as any other answer.
			rest, err := io.ReadAll(r)
			return append(buf, rest...), err
		}
	}
}

// ReadForm reads a form-encoded POST _search body of at most maxFormBytes, joined
// after the URL's query (FHIR allows parameters in both). Anything else is answered
// here; a body that does not arrive within the request's deadline is a 408.
func ReadForm(w http.ResponseWriter, r *http.Request, maxFormBytes int) (string, bool) {
	ct := r.Header.Get("Content-Type")
	if mt, _, _ := strings.Cut(ct, ";"); strings.TrimSpace(strings.ToLower(mt)) != "application/x-www-form-urlencoded" {
		fhir.Write(w, http.StatusUnsupportedMediaType, fhir.Outcome("not-supported", "POST _search takes a form-encoded body (application/x-www-form-urlencoded)"))
		return "", false
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, int64(maxFormBytes)+1))
	if err != nil {
		w.Header().Set("Connection", "close") // the rest of the body is never read
		if BodyTimedOut(r.Context(), err) {
			fhir.Write(w, http.StatusRequestTimeout, fhir.Outcome("timeout", "the form body did not arrive within server.request_timeout_ms"))
			return "", false
		}
		fhir.Write(w, http.StatusBadRequest, fhir.Outcome("invalid", "the form body could not be read"))
		return "", false
	}
	if len(body) > maxFormBytes {
		fhir.Write(w, http.StatusRequestEntityTooLarge, fhir.Outcome("too-long", fmt.Sprintf("the form body is longer than limits.max_query_bytes (%d bytes)", maxFormBytes)))
		return "", false
	}
	raw := strings.TrimSpace(string(body))
	if q := r.URL.RawQuery; q != "" {
		if raw == "" {
			return q, true
		}
		raw = q + "&" + raw
	}
	return raw, true
}

// NewViaID is a process's own Via id: "ferrofed-" and 12 random hex digits. Random,
// not the hostname: two gateways on one host (or in one test) must not take each
// other for themselves.
func NewViaID() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return "ferrofed-" + hex.EncodeToString(b)
}

// ViaCarries reports whether any of a request's Via values names id as a recipient
// (received-by), that is, whether the request has been through this gateway already.
func ViaCarries(values []string, id string) bool {
	for _, v := range values {
		for entry := range strings.SplitSeq(v, ",") {
			f := strings.Fields(entry)
			if len(f) >= 2 && f[1] == id {
				return true
			}
		}
	}
	return false
}

// ScrubBackend is text a backend wrote as a client may see it: the backend's own base
// becomes route (the gateway's route to it) and its host name, then the rule of
// gateway/scrub takes every other URL, address and credential out.
func ScrubBackend(text, base, host, route, name string) string {
	if len(text) > scrub.MaxBytes {
		text = text[:scrub.MaxBytes]
	}
	// The member's base and host are held as two private-use characters (taken out
	// of the member's own text first) while the rule runs, each a word of its own,
	// so that the gateway's route to the member survives the rule.
	text = strings.NewReplacer(baseMark, "", hostMark, "").Replace(text)
	text = strings.ReplaceAll(text, base, " "+baseMark+" ")
	text = strings.ReplaceAll(text, host, " "+hostMark+" ")
	text = scrub.Text(text)
	return strings.NewReplacer(" "+baseMark+" ", route, baseMark, route, " "+hostMark+" ", name, hostMark, name).Replace(text)
}

// The marks of ScrubBackend.
const (
	baseMark = "\uE000"
	hostMark = "\uE001"
)

// RoutedHeaders sets out's headers from the client's r: hop-by-hop and the client's
// credentials left behind, the forwarding headers (prefix and trusted: SetForwarded)
// and the gateway's via added, length the body's. The backend is asked for its answer
// in identity: the gateway rewrites the backend's base in what it answers, and
// compresses towards the client itself (docs/data-plane.md, "Routed requests").
func RoutedHeaders(out, r *http.Request, prefix string, trusted []netip.Prefix, via string, length int64) {
	CopyHeaders(out.Header, r.Header, RoutedDrop...)
	SetForwarded(out.Header, r, prefix, trusted)
	out.Header["Via"] = append(out.Header["Via"], via)
	out.Header["Accept-Encoding"] = []string{"identity"}
	out.ContentLength = length
	// Without a User-Agent of its own Go would send "Go-http-client"; an empty one
	// keeps the client's absent header absent.
	if _, ok := out.Header["User-Agent"]; !ok {
		out.Header["User-Agent"] = nil
	}
}

package proxy

import (
	"bufio"
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ferrofed/ferrofed/gateway/fhir"
)

// Backend is what passing a routed answer on needs to know of the backend that wrote
// it (docs/data-plane.md, "Routed requests").
type Backend struct {
	// Name names the backend in the gateway's own outcomes: "member node-a".
	Name string
	// Base is the backend's base URL without a trailing slash; Route is the gateway's
	// route to it, which takes its place in what the client sees.
	Base, Route string
	// MaxBody bounds a compressed answer once decoded (registry.max_member_body_bytes).
	MaxBody int64
	// Scrub is the backend's text as a client may see it (ScrubBackend).
	Scrub func(string) string
	// Issues are the issues of the backend's OperationOutcome body, scrubbed; none
	// when the body is no OperationOutcome.
	Issues func(body []byte) []fhir.Issue
}

// maxRoutedOutcome is the most of a backend's error answer that is read, decoded: a
// longer one is passed on as the gateway's own outcome.
const maxRoutedOutcome = 64 << 10

// PassAnswer passes res, the backend's final answer to the client's r, on to w
// (docs/data-plane.md, "Routed requests"):
//
//   - a body in a Content-Encoding (which the gateway did not ask for: it asks for
//     identity) is decoded when it is gzip or deflate, up to b.MaxBody decoded bytes;
//     any other coding, a stream that does not decode, or one past the bound is a 502;
//   - an error (4xx, 5xx) is the backend's OperationOutcome, its issues scrubbed, or,
//     when the body is none (HTML, text, cut off), the gateway's own naming the
//     status: 4xx kept, 5xx a 502;
//   - a JSON body has the backend's base rewritten to b.Route, and is gzipped when the
//     client accepts gzip; one that is cut off (a JSON document that never ends) is a
//     502, or, once its head is sent, aborts the client's connection;
//   - Location, Content-Location and Link have the backend's base rewritten.
//
// err is the backend's body failing to read (the caller records it); abort says that
// the client's connection must be broken off (Abort), the answer having begun.
func PassAnswer(w http.ResponseWriter, r *http.Request, res *http.Response, b Backend, t *StreamTimes) (abort bool, err error) {
	head := r.Method == http.MethodHead
	if res.StatusCode >= http.StatusBadRequest {
		return passError(w, res, b, head, t)
	}
	if coded(res.Header) {
		if head || !bodyAllowed(res.StatusCode) {
			res.Header.Del("Content-Length") // the coded length is not the gateway's
		} else if ok, err := decodeWhole(w, res, b, t); !ok {
			return err != nil, err
		}
		res.Header.Del("Content-Encoding")
	}
	h := w.Header()
	// The gateway never passes a cookie to a backend, so a backend's cookie could only
	// confuse the client about whose it is.
	CopyHeaders(h, res.Header, "Set-Cookie")
	rewriteHeaders(h, b)
	switch {
	case head || !bodyAllowed(res.StatusCode):
		w.WriteHeader(res.StatusCode)
		return false, nil
	case Rewritable(res):
		addVary(h, "Accept-Encoding")
		// The bytes the client gets are not the backend's (rewritten, perhaps gzipped):
		// a strong validator of the backend's would claim they are (RFC 9110, 8.8.1).
		if et := h.Get("ETag"); et != "" && !strings.HasPrefix(et, "W/") {
			h.Set("ETag", "W/"+et)
		}
		gz := AcceptsGzip(r.Header) && res.StatusCode != http.StatusPartialContent && res.Header.Get("Content-Range") == ""
		return rewriteBody(w, res, b, gz, t)
	}
	w.WriteHeader(res.StatusCode)
	// A client that goes away mid-body (the write fails) only stops the copy.
	err = Stream(w, res.Body, nil, t)
	return err != nil, err
}

// rewriteHeaders rewrites the backend's base to the gateway's route in the headers
// that carry its URLs.
func rewriteHeaders(h http.Header, b Backend) {
	for _, k := range []string{"Location", "Content-Location"} {
		if v := h.Get(k); v != "" && strings.HasPrefix(v, b.Base) {
			h.Set(k, b.Route+v[len(b.Base):])
		}
	}
	for i, v := range h["Link"] {
		if strings.Contains(v, b.Base) {
			h["Link"][i] = strings.ReplaceAll(v, b.Base, b.Route)
		}
	}
}

// bodyAllowed reports whether an answer of status may have a body (RFC 9110).
func bodyAllowed(status int) bool {
	return status >= http.StatusOK && status != http.StatusNoContent && status != http.StatusNotModified
}

// coded reports whether an answer's body is in a Content-Encoding other than identity.
func coded(h http.Header) bool {
	for _, v := range h["Content-Encoding"] {
		for c := range strings.SplitSeq(v, ",") {
			if c = strings.TrimSpace(c); c != "" && !strings.EqualFold(c, "identity") {
				return true
			}
		}
	}
	return false
}

// errDecode is a coded body that does not decode, or one of a coding the gateway
// does not decode.
var errDecode = errors.New("the body does not decode")

// readerErr remembers the error of the backend's body itself, so that a body that
// broke off is not taken for one that does not decode.
type readerErr struct {
	r   io.Reader
	err error
}

func (e *readerErr) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		e.err = err
	}
	return n, err
}

// decoded is a reader of res's body decoded: gzip (x-gzip) or deflate (zlib, or the
// raw deflate some servers send under that name), one coding only. Any other is
// errDecode; src is the body as the backend sends it.
func decoded(res *http.Response, src *readerErr) (io.Reader, error) {
	codings := strings.Split(strings.Join(res.Header["Content-Encoding"], ","), ",")
	var coding string
	for _, c := range codings {
		if c = strings.ToLower(strings.TrimSpace(c)); c != "" && c != "identity" {
			if coding != "" {
				return nil, errDecode
			}
			coding = c
		}
	}
	switch coding {
	case "gzip", "x-gzip":
		zr, err := gzip.NewReader(src)
		if err != nil {
			return nil, err
		}
		return zr, nil
	case "deflate":
		br := bufio.NewReader(src)
		if p, err := br.Peek(2); err == nil && p[0]&0x0f == 8 && (uint16(p[0])<<8|uint16(p[1]))%31 == 0 {
			return zlib.NewReader(br)
		}
		return flate.NewReader(br), nil
	}
	return nil, errDecode
}

// readDecoded reads res's body decoded, at most limit+1 bytes (one more than a usable
// answer may have, so that a larger one shows). err is the backend's body failing
// (it broke off), else errDecode for a body that does not decode.
func readDecoded(res *http.Response, limit int64, t *StreamTimes) ([]byte, error) {
	start := time.Now()
	defer func() { t.Reading += time.Since(start) }()
	src := &readerErr{r: res.Body}
	dec, err := decoded(res, src)
	var body []byte
	if err == nil {
		body, err = io.ReadAll(io.LimitReader(dec, limit+1))
	}
	switch {
	case src.err != nil:
		return nil, src.err
	case err != nil:
		return nil, errDecode
	}
	return body, nil
}

// decodeWhole reads a successful coded answer whole, decoded, and puts it back on res
// as an identity body of known length; an answer it cannot is the gateway's 502
// (ok false; err the backend's body failing).
func decodeWhole(w http.ResponseWriter, res *http.Response, b Backend, t *StreamTimes) (ok bool, err error) {
	body, err := readDecoded(res, b.MaxBody, t)
	var why string
	switch {
	case err != nil && !errors.Is(err, errDecode):
		fhir.Write(w, http.StatusBadGateway, fhir.Outcome("transient", fmt.Sprintf("%s broke its answer off (HTTP %d)", b.Name, res.StatusCode)))
		return false, err
	case err != nil:
		why = fmt.Sprintf("in Content-Encoding %q, which the gateway does not decode (it asks for identity), or does not decode", b.Scrub(res.Header.Get("Content-Encoding")))
	case int64(len(body)) > b.MaxBody:
		why = fmt.Sprintf("longer than registry.max_member_body_bytes (%d bytes) once decoded", b.MaxBody)
	}
	if why != "" {
		fhir.Write(w, http.StatusBadGateway, fhir.Outcome("processing", fmt.Sprintf("%s answered HTTP %d with a body %s", b.Name, res.StatusCode, why)))
		return false, nil
	}
	res.Body = io.NopCloser(bytes.NewReader(body))
	res.ContentLength = int64(len(body))
	res.Header.Set("Content-Length", strconv.Itoa(len(body)))
	return true, nil
}

// passError answers an error of the backend (4xx, 5xx): its status and headers (their
// values through b.Scrub), and its OperationOutcome's issues as a federated page
// carries them, or, when the body is no such OperationOutcome (empty, HTML, text, cut
// off, in a coding that does not decode, longer than maxRoutedOutcome), the gateway's
// own outcome naming the backend and the status: a 4xx keeps it, a 5xx is a 502. A
// body that breaks off before its end is a 502 and the read's error.
func passError(w http.ResponseWriter, res *http.Response, b Backend, head bool, t *StreamTimes) (bool, error) {
	var body []byte
	var err error
	if coded(res.Header) {
		body, err = readDecoded(res, maxRoutedOutcome, t)
		if errors.Is(err, errDecode) {
			body, err = nil, nil
		}
	} else if !head {
		start := time.Now()
		body, err = io.ReadAll(io.LimitReader(res.Body, maxRoutedOutcome+1))
		t.Reading += time.Since(start)
	}
	h := w.Header()
	CopyHeaders(h, res.Header, "Set-Cookie", "Content-Encoding", "Content-Length", "Content-Location", "Content-Range", "Etag", "Last-Modified", "Location")
	// Its headers are the backend's text too (a WWW-Authenticate realm, a server's
	// name and address).
	for _, vs := range h {
		for i, v := range vs {
			vs[i] = b.Scrub(v)
		}
	}
	if err != nil {
		fhir.Write(w, http.StatusBadGateway, fhir.Outcome("transient", fmt.Sprintf("%s broke its answer off (HTTP %d)", b.Name, res.StatusCode)))
		return false, err
	}
	var issues []fhir.Issue
	if len(body) <= maxRoutedOutcome {
		issues = b.Issues(body)
	}
	status := res.StatusCode
	if len(issues) == 0 {
		if status >= http.StatusInternalServerError {
			status = http.StatusBadGateway
		}
		issues = []fhir.Issue{{Severity: "error", Code: fhir.IssueCodeOfStatus(res.StatusCode),
			Diagnostics: fmt.Sprintf("%s answered HTTP %d", b.Name, res.StatusCode)}}
	}
	fhir.Write(w, status, fhir.OperationOutcome{ResourceType: "OperationOutcome", Issue: issues})
	return false, nil
}

// AcceptsGzip reports whether a client's Accept-Encoding takes gzip: gzip, x-gzip or
// "*" with a q above 0, gzip not refused by name.
func AcceptsGzip(h http.Header) bool {
	ok := false
	for _, v := range h["Accept-Encoding"] {
		for part := range strings.SplitSeq(v, ",") {
			coding, params, _ := strings.Cut(part, ";")
			coding = strings.ToLower(strings.TrimSpace(coding))
			if coding != "gzip" && coding != "x-gzip" && coding != "*" {
				continue
			}
			q := 1.0
			if k, val, found := strings.Cut(strings.TrimSpace(params), "="); found && strings.EqualFold(strings.TrimSpace(k), "q") {
				if f, err := strconv.ParseFloat(strings.TrimSpace(val), 64); err == nil {
					q = f
				}
			}
			if q <= 0 && coding != "*" {
				return false
			}
			ok = ok || q > 0
		}
	}
	return ok
}

// addVary adds k to h's Vary unless it is there.
func addVary(h http.Header, k string) {
	for _, v := range h["Vary"] {
		for f := range strings.SplitSeq(v, ",") {
			if f = strings.TrimSpace(f); f == "*" || textproto.CanonicalMIMEHeaderKey(f) == k {
				return
			}
		}
	}
	h.Add("Vary", k)
}

// minGzip is the least rewritten answer of known length that is gzipped for a client
// that takes it: a smaller one gains less than the gzip header and trailer cost.
const minGzip = 1 << 10

// gzipWriters are the writers of the answers gzipped for the client, at BestSpeed:
// the gateway's compression is on the answer's path, so its time is the client's.
var gzipWriters = sync.Pool{New: func() any {
	zw, _ := gzip.NewWriterLevel(io.Discard, gzip.BestSpeed)
	return zw
}}

// gzipResponse writes through a gzip writer to the client; a flush flushes both.
type gzipResponse struct {
	http.ResponseWriter
	zw *gzip.Writer
}

func (g *gzipResponse) Write(p []byte) (int, error) { return g.zw.Write(p) }

func (g *gzipResponse) FlushError() error {
	if err := g.zw.Flush(); err != nil {
		return err
	}
	return http.NewResponseController(g.ResponseWriter).Flush()
}

// cutOff answers a successful JSON answer whose document never ends, before its head
// is sent: the gateway's 502, the backend's headers left behind.
func cutOff(w http.ResponseWriter, b Backend, status int) {
	clear(w.Header())
	fhir.Write(w, http.StatusBadGateway, fhir.Outcome("processing", fmt.Sprintf("%s answered HTTP %d with a JSON body that is cut off", b.Name, status)))
}

// jsonDepth follows a JSON text's nesting as its bytes pass, to tell a whole document
// from one cut off, without parsing it: a truncated answer never passes for a whole
// one.
type jsonDepth struct {
	depth            int
	inString, escape bool
}

func (j *jsonDepth) feed(p []byte) {
	for i := 0; i < len(p); {
		if !j.inString {
			// Between strings: a few bytes of structure.
			switch p[i] {
			case '"':
				j.inString = true
			case '{', '[':
				j.depth++
			case '}', ']':
				j.depth--
			}
			i++
			continue
		}
		if j.escape {
			j.escape = false
			i++
			continue
		}
		// Inside a string: to its closing quote, unless an escape comes first.
		seg := p[i:]
		end := bytes.IndexByte(seg, '"')
		if end >= 0 {
			seg = seg[:end]
		}
		if k := bytes.IndexByte(seg, '\\'); k >= 0 {
			j.escape = true
			i += k + 1
			continue
		}
		if end < 0 {
			return
		}
		j.inString = false
		i += end + 1
	}
}

// whole reports whether the text fed so far ends every string, object and array it
// began.
func (j *jsonDepth) whole() bool { return !j.inString && j.depth == 0 }

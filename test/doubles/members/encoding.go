package members

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"html"
	"net/http"
	"strconv"
	"strings"

	"github.com/ferrofed/ferrofed/test/double"
)

// Encoding shapes how a member encodes its answers: compressed, as production FHIR
// servers do when asked, and the ways of a member no gateway may pass on as they are
// (docs/data-plane.md, "Routed requests"). The zero value sends every body as it is.
type Encoding struct {
	// Gzip compresses an answer with gzip when its request's Accept-Encoding allows
	// gzip (with a q above 0), as a production server does.
	Gzip bool
	// ForceEncoding is the Content-Encoding of every answer, whatever the request
	// asked: "gzip" compressed, "gzip-corrupt" labelled gzip but no gzip stream, any
	// other ("br", "zstd") the label alone, the body as it is.
	ForceEncoding string
	// ErrorBody makes the error answers of the knobs (Knobs.Status from 400) something
	// other than an OperationOutcome, as a server's front (a proxy, a servlet
	// container) answers: "html" an HTML page, "text" plain text, "cut" an
	// OperationOutcome cut in the middle. Each carries the marker and
	// Options.Diagnostics.
	ErrorBody string
	// OwnBase builds every URL on the member's own base, whatever forwarding headers
	// the request carries, as a server not set up behind a proxy does.
	OwnBase bool
}

// validate names the first field out of range.
func (e Encoding) validate() error {
	switch e.ErrorBody {
	case "", "html", "text", "cut":
	default:
		return fmt.Errorf("error body %q is not html, text or cut", e.ErrorBody)
	}
	return nil
}

// encode is a encoded as the Encoding says, for the request r (nil: an answer of the
// knobs, whose request is not known; Gzip then does not apply).
func (s *Server) encode(r *double.Request, a double.Answer) double.Answer {
	coding := s.Opts.ForceEncoding
	if coding == "" && s.Opts.Gzip && r != nil && acceptsGzip(r.Header.Values("Accept-Encoding")) {
		coding = "gzip"
	}
	if coding == "" {
		return a
	}
	a.Header = a.Header.Clone()
	if a.Header == nil {
		a.Header = http.Header{}
	}
	switch coding {
	case "gzip":
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		zw.Write(a.Body) //nolint:errcheck // a bytes.Buffer does not fail.
		zw.Close()       //nolint:errcheck // idem.
		a.Body = buf.Bytes()
	case "gzip-corrupt":
		// A gzip header, then the answer as it is: no deflate stream.
		a.Body = append([]byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff}, a.Body...)
		coding = "gzip"
	}
	a.Header.Set("Content-Encoding", coding)
	a.Header.Add("Vary", "Accept-Encoding")
	return a
}

// acceptsGzip reports whether an Accept-Encoding allows gzip.
func acceptsGzip(values []string) bool {
	for _, v := range values {
		for part := range strings.SplitSeq(v, ",") {
			coding, params, _ := strings.Cut(part, ";")
			if c := strings.ToLower(strings.TrimSpace(coding)); c != "gzip" && c != "*" {
				continue
			}
			if _, q, ok := strings.Cut(params, "q="); ok {
				if f, err := strconv.ParseFloat(strings.TrimSpace(q), 64); err == nil && f == 0 {
					continue
				}
			}
			return true
		}
	}
	return false
}

// errorAnswer is the knobs' error answer of status: an OperationOutcome, or what
// ErrorBody says.
func (s *Server) errorAnswer(status int, text string) double.Answer {
	words := text + " " + s.Opts.Marker + s.extra()
	switch s.Opts.ErrorBody {
	case "html":
		body := "<!DOCTYPE html><html><head><title>" + strconv.Itoa(status) + "</title></head><body><h1>Error</h1><p>" + html.EscapeString(words) + "</p></body></html>"
		return double.Answer{Status: status, ContentType: "text/html; charset=utf-8", Body: []byte(body)}
	case "text":
		return double.Answer{Status: status, ContentType: "text/plain; charset=utf-8", Body: []byte(words)}
	case "cut":
		a := s.fail(status, "exception", text)
		a.Body = double.Truncated(a.Body, s.Opts.Marker)
		return a
	}
	return s.fail(status, "exception", text)
}

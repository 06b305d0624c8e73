package fhir

import (
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// xmlTypes are the media types of FHIR XML.
var xmlTypes = []string{"application/fhir+xml", "application/xml+fhir", "application/xml", "text/xml", "xml"}

// jsonTypes are the media types (and _format values) of FHIR JSON.
var jsonTypes = []string{"application/fhir+json", "application/json+fhir", "application/json", "json", "*/*", "application/*"}

// Acceptable reports whether the client can take FHIR JSON (docs/data-plane.md: the data
// plane is JSON, XML is a 406). _format wins over Accept, as FHIR says. anyType makes
// only an XML-only request unacceptable (the routed path, where a member may answer
// a Binary of any type); otherwise an Accept must allow JSON.
func Acceptable(r *http.Request, anyType bool) bool {
	if f := formatParam(r.URL.RawQuery); f != "" {
		mt := strings.ToLower(strings.TrimSpace(f))
		if base, _, err := mime.ParseMediaType(mt); err == nil {
			mt = base
		}
		if slices.Contains(xmlTypes, mt) {
			return false
		}
		return anyType || slices.Contains(jsonTypes, mt)
	}
	accept := r.Header.Values("Accept")
	if len(accept) == 0 {
		return true
	}
	sawXML, sawOther := false, false
	for _, v := range accept {
		for part := range strings.SplitSeq(v, ",") {
			part = strings.TrimSpace(part)
			if part == "" {
				continue
			}
			mt, params, err := mime.ParseMediaType(part)
			if err != nil {
				sawOther = true
				continue
			}
			if q, ok := params["q"]; ok {
				if f, err := strconv.ParseFloat(q, 64); err == nil && f == 0 {
					continue
				}
			}
			switch {
			case slices.Contains(jsonTypes, mt):
				return true
			case slices.Contains(xmlTypes, mt):
				sawXML = true
			default:
				sawOther = true
			}
		}
	}
	if anyType {
		return !sawXML || sawOther
	}
	return false
}

// formatParam is the query's _format, "" when absent (read without parsing the
// whole query: the routed path is benchmarked).
func formatParam(raw string) string {
	if !strings.Contains(raw, "_format=") {
		return ""
	}
	for pair := range strings.SplitSeq(raw, "&") {
		if v, ok := strings.CutPrefix(pair, "_format="); ok {
			if u, err := url.QueryUnescape(v); err == nil {
				return u
			}
			return v
		}
	}
	return ""
}

var NotAcceptable = Outcome("not-supported", "the data plane answers FHIR JSON only (application/fhir+json); XML is not supported")

// MethodNotAllowed answers 405 for route, which answers allow only.
func MethodNotAllowed(w http.ResponseWriter, allow, route string) {
	w.Header().Set("Allow", allow)
	Write(w, http.StatusMethodNotAllowed, Outcome("not-supported", route+" answers "+allow+" only"))
}

// GatewayBase is the gateway's base URL as the client reached it: the scheme of the
// connection, the Host it asked for, server.base_path.
func GatewayBase(r *http.Request, basePath string) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host + strings.TrimSuffix(basePath, "/")
}

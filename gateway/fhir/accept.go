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

// Acceptable reports whether the client can take FHIR JSON of R4 (docs/data-plane.md,
// "Routes": the data plane is JSON, XML is a 406, and so is another fhirVersion).
// _format wins over Accept, as FHIR says. anyType makes only an XML-only request, or
// one of another FHIR version only, unacceptable (the routed path, where a member may
// answer a Binary of any type); otherwise an Accept must allow R4 JSON.
func Acceptable(r *http.Request, anyType bool) bool {
	if f := formatParam(r.URL.RawQuery); f != "" {
		mt := strings.ToLower(strings.TrimSpace(f))
		if base, params, err := mime.ParseMediaType(mt); err == nil {
			if !r4Version(params) {
				return false
			}
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
	sawXML, sawOther, sawVersion := false, false, false
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
			if !r4Version(params) {
				sawVersion = true
				continue
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
		return (!sawXML && !sawVersion) || sawOther
	}
	return false
}

// r4Version reports whether a media type's parameters name FHIR R4 or no version:
// fhirVersion 4.0 (R4's own name for itself in a media type) or 4.0.1.
func r4Version(params map[string]string) bool {
	v, ok := params["fhirversion"]
	return !ok || v == "4.0" || v == "4.0.1"
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

var NotAcceptable = Outcome("not-supported", "the data plane answers FHIR R4 JSON only (application/fhir+json, fhirVersion 4.0); XML and other FHIR versions are not supported")

// GetOrHead are the methods of a route that reads: HEAD answers the headers of the
// GET, without its body (docs/data-plane.md, "Routes").
const GetOrHead = "GET, HEAD"

// Reads reports whether r is a GET or a HEAD.
func Reads(r *http.Request) bool { return r.Method == http.MethodGet || r.Method == http.MethodHead }

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

package identity

import (
	"bytes"
	"encoding/json"
	"net/http"
	"time"

	"github.com/ferrofed/ferrofed/gateway/fhir"
)

// Answer is what the gateway answers a federated read, vread or history with.
type Answer struct {
	Status int
	// Body is the resource (or history Bundle) in the federated identity, or an
	// OperationOutcome.
	Body any
	// ETag and LastModified are the resource's version and time, "" for none.
	ETag, LastModified string
}

// Answer is the gateway's answer to a read of one of the member's resources by its
// federated id (docs/data-plane.md, "One identity space"), made of the member's status
// and body: a resource is rewritten (Resource), a history Bundle entry by entry; a
// 404 or 410 is the gateway's own, another 4xx keeps its status with the member's
// issues passed through clean (never its other text), and anything else, a body that
// is no FHIR JSON included, is a 502 naming only the member.
func (r Rewriter) Answer(status int, body []byte, clean func(string) string) Answer {
	switch {
	case status == http.StatusNotFound:
		return Answer{Status: status, Body: fhir.Outcome("not-found", "no such resource")}
	case status == http.StatusGone:
		return Answer{Status: status, Body: fhir.Outcome("deleted", "the resource was deleted")}
	case status >= 400 && status < 500:
		oo := fhir.Outcome("processing", "member "+r.Member+" refused the read")
		if issues := fhir.ReadIssues(body, 20, clean); len(issues) > 0 {
			oo.Issue = issues
		}
		return Answer{Status: status, Body: oo}
	case status < 200 || status > 299:
		return r.failed(status)
	}
	head, ok := fhir.ReadHead(body)
	switch {
	case !ok || !json.Valid(body):
		return r.failed(status)
	case head.ResourceType == "Bundle":
		return r.history(body)
	}
	a := Answer{Status: http.StatusOK, Body: json.RawMessage(r.Resource(body))}
	a.ETag, a.LastModified = version(body)
	return a
}

func (r Rewriter) failed(status int) Answer {
	return Answer{Status: http.StatusBadGateway, Body: fhir.Outcome("transient", "member "+r.Member+" did not answer the read with FHIR JSON")}
}

// version is the ETag (W/"{versionId}") and Last-Modified of a resource's meta.
func version(body []byte) (etag, lastModified string) {
	var res struct {
		Meta struct {
			VersionID   string `json:"versionId"`
			LastUpdated string `json:"lastUpdated"`
		} `json:"meta"`
	}
	if json.Unmarshal(body, &res) != nil {
		return "", ""
	}
	if fhir.ValidID(res.Meta.VersionID) {
		etag = `W/"` + res.Meta.VersionID + `"`
	}
	if t, err := time.Parse(time.RFC3339, res.Meta.LastUpdated); err == nil {
		lastModified = t.UTC().Format(http.TimeFormat)
	}
	return etag, lastModified
}

// history rewrites a history Bundle: each entry's fullUrl (the federated URL of its
// resource), resource, request.url and response.location; its links under the
// member's base become the routed ones (Resource's rule for every other URL).
func (r Rewriter) history(body []byte) Answer {
	var b map[string]any
	if json.Unmarshal(body, &b) != nil {
		return r.failed(http.StatusOK)
	}
	entries, _ := b["entry"].([]any)
	for _, e := range entries {
		entry, ok := e.(map[string]any)
		if !ok {
			continue
		}
		if raw, ok := entry["resource"]; ok {
			res, _ := json.Marshal(raw)
			entry["resource"] = json.RawMessage(r.Resource(res))
			if head, ok := fhir.ReadHead(res); ok {
				if fid, ok := r.ID(head.ID); ok && fhir.ValidResourceType(head.ResourceType) {
					entry["fullUrl"] = r.GW + "/fhir/" + head.ResourceType + "/" + fid
				}
			}
		}
		r.rewriteField(entry, "request", "url")
		r.rewriteField(entry, "response", "location")
	}
	out, _ := json.Marshal(b)
	if base := []byte(r.Base); len(base) > 0 {
		out = bytes.ReplaceAll(out, base, []byte(r.Route))
	}
	return Answer{Status: http.StatusOK, Body: json.RawMessage(out)}
}

// rewriteField rewrites the reference in entry[object][field].
func (r Rewriter) rewriteField(entry map[string]any, object, field string) {
	o, ok := entry[object].(map[string]any)
	if !ok {
		return
	}
	if v, ok := o[field].(string); ok {
		if fed, changed := r.Reference(v); changed {
			o[field] = fed
		}
	}
}

// Package fhir is what the gateway knows of FHIR R4 itself, whoever asks: the id
// and resource type rules, OperationOutcome and its issue codes, the answer writer,
// the media types the data plane answers, and the readers of a searchset page (the
// scanners that walk its JSON without decoding it). It imports no other ferrofed
// package (docs/architecture.md).
package fhir

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
)

// MediaType is the content type of every FHIR body the gateway writes.
const MediaType = "application/fhir+json"

// ValidResourceType reports whether t may name a FHIR resource type: FHIR's lexical
// form, [A-Z][A-Za-z]+, at most 64 characters. Anything else in {base}/fhir/{Type} is
// refused before a single member is asked. (A loop, not a regular expression: it runs
// for every entry of every page.)
func ValidResourceType(t string) bool {
	if len(t) < 2 || len(t) > 64 || t[0] < 'A' || t[0] > 'Z' {
		return false
	}
	for i := 1; i < len(t); i++ {
		if c := t[i]; (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') {
			return false
		}
	}
	return true
}

// ValidID reports whether id is FHIR's id type, [A-Za-z0-9\-.]{1,64}: what may
// follow {Type}/ in a fullUrl the gateway builds.
func ValidID(id string) bool {
	if len(id) < 1 || len(id) > 64 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (c < '0' || c > '9') && c != '-' && c != '.' {
			return false
		}
	}
	return true
}

// Link is a Bundle.link.
type Link struct {
	Relation string `json:"relation"`
	URL      string `json:"url"`
}

// OperationOutcome is a FHIR OperationOutcome: the body of every error the data
// plane answers itself, and of each outcome entry.
type OperationOutcome struct {
	ResourceType string  `json:"resourceType"`
	Issue        []Issue `json:"issue"`
}

// Issue is one OperationOutcome issue.
type Issue struct {
	Severity    string        `json:"severity"`
	Code        string        `json:"code"`
	Details     *IssueDetails `json:"details,omitempty"`
	Diagnostics string        `json:"diagnostics,omitempty"`
	Expression  []string      `json:"expression,omitempty"`
}

// IssueDetails is an issue's details, as text.
type IssueDetails struct {
	Text string `json:"text,omitempty"`
}

func Outcome(code, diagnostics string) OperationOutcome {
	return OperationOutcome{ResourceType: "OperationOutcome", Issue: []Issue{{Severity: "error", Code: code, Diagnostics: diagnostics}}}
}

// ParamOutcome is a 400's body for a search parameter: the issue names it in its
// details and its diagnostics.
func ParamOutcome(code, param, diagnostics string) OperationOutcome {
	return OperationOutcome{ResourceType: "OperationOutcome", Issue: []Issue{{Severity: "error", Code: code, Details: &IssueDetails{Text: "search parameter " + param}, Diagnostics: diagnostics}}}
}

// Write writes v (an OperationOutcome, a Bundle, any JSON value) as the FHIR JSON
// answer of status.
func Write(w http.ResponseWriter, status int, v any) {
	var body []byte
	var err error
	if m, ok := v.(json.Marshaler); ok {
		// Called directly: json.Marshal would re-scan what MarshalJSON wrote.
		body, err = m.MarshalJSON()
	} else {
		body, err = json.Marshal(v)
	}
	if err != nil {
		status, body = http.StatusInternalServerError, []byte(`{"resourceType":"OperationOutcome","issue":[{"severity":"error","code":"exception"}]}`)
	}
	h := w.Header()
	h.Set("Content-Type", MediaType)
	// With its length known the answer goes out as one body, not as chunks written
	// (and read) piecemeal plus a last one of its own.
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	w.Write(body) //nolint:errcheck // the client may be gone.
}

func ValidSeverity(s string) string {
	switch s {
	case "fatal", "error", "warning", "information":
		return s
	}
	return "error"
}

// issueCodes is R4's IssueType value set: a member's code outside it becomes
// "processing", so that the gateway's answer stays valid R4.
var issueCodes = map[string]bool{
	"invalid": true, "structure": true, "required": true, "value": true, "invariant": true, "security": true,
	"login": true, "unknown": true, "expired": true, "forbidden": true, "suppressed": true, "processing": true,
	"not-supported": true, "duplicate": true, "multiple-matches": true, "not-found": true, "deleted": true,
	"too-long": true, "code-invalid": true, "extension": true, "too-costly": true, "business-rule": true,
	"conflict": true, "transient": true, "lock-error": true, "no-store": true, "exception": true, "timeout": true,
	"incomplete": true, "throttled": true, "informational": true,
}

func ValidIssueCode(c string) string {
	if issueCodes[c] {
		return c
	}
	return "processing"
}

// NotesKey is the gin context key of the outcome entries ([][]byte, each an
// OutcomeEntry) that what runs before a federated search's route (the access guard)
// adds to the first page of its answer.
const NotesKey = "ferrofed.fhir.notes"

// OutcomeEntry is oo as a searchset entry of search mode outcome.
func OutcomeEntry(oo OperationOutcome) []byte {
	b, _ := json.Marshal(struct {
		Resource OperationOutcome `json:"resource"`
		Search   struct {
			Mode string `json:"mode"`
		} `json:"search"`
	}{Resource: oo, Search: struct {
		Mode string `json:"mode"`
	}{"outcome"}})
	return b
}

// WantsStrict reports whether the Prefer header asks for handling=strict.
func WantsStrict(prefer []string) bool {
	for _, v := range prefer {
		for p := range strings.SplitSeq(v, ",") {
			k, val, _ := strings.Cut(strings.TrimSpace(p), "=")
			if strings.EqualFold(strings.TrimSpace(k), "handling") && strings.Trim(strings.TrimSpace(val), `"`) == "strict" {
				return true
			}
		}
	}
	return false
}

// IssueCodeOfStatus is the IssueType of an error status a server answered.
func IssueCodeOfStatus(status int) string {
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

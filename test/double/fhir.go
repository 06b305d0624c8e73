package double

import (
	"encoding/json"
	"mime"
	"strings"
)

// FHIRJSON is an answer of status with v as FHIR JSON. v is the double's own
// fixture or answer, always marshallable: a failure is the double's bug.
func FHIRJSON(status int, v any) Answer {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return Answer{Status: status, ContentType: "application/fhir+json", Body: b}
}

// OperationOutcome is a FHIR error answer with one issue, marker appended to its
// diagnostics (so that a test can tell the double's words wherever they turn up).
func OperationOutcome(status int, severity, code, text, marker string) Answer {
	return FHIRJSON(status, map[string]any{
		"resourceType": "OperationOutcome",
		"issue":        []any{map[string]any{"severity": severity, "code": code, "diagnostics": text + " " + marker}},
	})
}

// JSONAccepted reports whether a request's Accept header and _format parameter
// allow FHIR JSON, as a FHIR server reads them.
func JSONAccepted(accept, format string) bool {
	switch format {
	case "", "json", "application/json", "application/fhir+json":
	default:
		return false
	}
	if strings.TrimSpace(accept) == "" {
		return true
	}
	for part := range strings.SplitSeq(accept, ",") {
		mt, _, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		switch mt {
		case "*/*", "application/*", "application/json", "application/fhir+json":
			return true
		}
	}
	return false
}

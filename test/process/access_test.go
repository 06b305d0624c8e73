package process

import (
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ferrofed/ferrofed/test/doubles/members"
	"github.com/ferrofed/ferrofed/test/doubles/members/fhirschema"
)

// The scope table, through the built binary: each interaction, on the federated
// surface, the routed one and as a transaction's entry, under each form of scope
// (SMART v1 and v2, a wildcard, the patient, user and system levels) is allowed
// (the member is asked) or refused (a 403 OperationOutcome, or a 404 for another
// patient, and the member is not sent the request; a read the token's patient confines
// is sent only once the member finds it in the patient's compartment) as
// docs/security.md says.
func TestTheScopeTableThroughTheBinary(t *testing.T) {
	// Observation/a-1's subject is Patient/a-1, Observation/a-2's Patient/a-2.
	m := members.Start(t, members.Options{ID: "a", Subjects: true})
	port := freePort(t)
	path := filepath.Join(t.TempDir(), "ferrofed.toml")
	writeFile(t, path, fmt.Sprintf("[server]\nlisten = \"127.0.0.1:%d\"\ntermination_message_path = \"\"\n[[registry.members]]\nid = \"a\"\nquery_endpoint = %q\n", port, m.URL))
	serve(t, path)
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	waitReady(t, base)

	const transaction = `{"resourceType":"Bundle","type":"transaction","entry":[` +
		`{"request":{"method":"POST","url":"Patient"},"resource":{"resourceType":"Patient"}},` +
		`{"request":{"method":"DELETE","url":"Observation/1"}}]}`
	type row struct {
		scope, patient, method, path, body, header string
		want                                       int // 0: allowed (the member is asked); 403 or 404: refused
	}
	const allow = 0
	rows := []row{
		// Federated searches.
		{"system/Patient.rs", "", "GET", "/fhir/Patient?name=x", "", "", allow},
		{"system/Patient.read", "", "GET", "/fhir/Patient?name=x", "", "", allow},
		{"system/*.read", "", "GET", "/fhir/Observation?code=x", "", "", allow},
		{"user/*.rs", "", "GET", "/fhir/Observation?code=x", "", "", allow},
		{"system/Patient.r", "", "GET", "/fhir/Patient?name=x", "", "", 403},
		{"system/Observation.rs", "", "GET", "/fhir/Patient?name=x", "", "", 403},
		{"user/Patient.write", "", "GET", "/fhir/Patient?name=x", "", "", 403},
		{"system/Observation.rs", "", "GET", "/fhir/Observation?patient.identifier=x%7C1", "", "", 403},
		{"patient/*.rs", "a.a-1", "GET", "/fhir/Observation?code=x", "", "", allow},
		{"patient/*.rs", "a.a-1", "GET", "/fhir/Observation?subject=Patient/a.a-2", "", "", 403},
		{"patient/*.rs", "", "GET", "/fhir/Observation?code=x", "", "", 403},
		// Routed reads, vreads, histories and searches.
		{"system/Patient.rs", "", "GET", "/nodes/a/fhir/Patient/a-1", "", "", allow},
		{"system/Patient.read", "", "GET", "/nodes/a/fhir/Patient/a-1/_history/1", "", "", allow},
		{"system/Patient.s", "", "GET", "/nodes/a/fhir/Patient/a-1", "", "", 403},
		{"system/Patient.r", "", "GET", "/nodes/a/fhir/Patient/_history", "", "", 403},
		{"system/Patient.rs", "", "GET", "/nodes/a/fhir/Patient?name=x", "", "", allow},
		{"patient/Patient.rs", "a.a-1", "GET", "/nodes/a/fhir/Patient/a-1", "", "", allow},
		{"patient/Patient.rs", "a.a-1", "GET", "/nodes/a/fhir/Patient/a-2", "", "", 404},
		{"patient/*.rs", "a.a-1", "GET", "/nodes/a/fhir/Observation/a-1", "", "", allow},
		{"patient/*.rs", "a.a-1", "GET", "/nodes/a/fhir/Observation/a-2", "", "", 404},
		{"patient/*.rs", "a.a-1", "GET", "/fhir/Observation/a.a-1", "", "", allow},
		{"patient/*.rs", "a.a-1", "GET", "/fhir/Observation/a.a-2", "", "", 404},
		{"patient/*.rs", "a-1", "GET", "/fhir/Observation?code=x", "", "", 403},
		{"patient/Observation.r", "a.a-1", "GET", "/nodes/a/fhir/Observation/a-2/_history/1", "", "", 404},
		{"system/Observation.r?subject=Patient/a-1", "", "GET", "/nodes/a/fhir/Observation/a-2", "", "", 404},
		{"system/Observation.r?subject=Patient/a-1", "", "GET", "/nodes/a/fhir/Observation/a-1", "", "", allow},
		// Routed writes.
		{"user/Patient.write", "", "POST", "/nodes/a/fhir/Patient", `{"resourceType":"Patient"}`, "", allow},
		{"user/Patient.c", "", "POST", "/nodes/a/fhir/Patient", `{"resourceType":"Patient"}`, "", allow},
		{"user/Patient.rs", "", "POST", "/nodes/a/fhir/Patient", `{"resourceType":"Patient"}`, "", 403},
		{"user/Patient.c", "", "POST", "/nodes/a/fhir/Patient", `{"resourceType":"Patient"}`, "If-None-Exist: identifier=x%7C1", 403},
		{"user/Patient.cs", "", "POST", "/nodes/a/fhir/Patient", `{"resourceType":"Patient"}`, "If-None-Exist: identifier=x%7C1", allow},
		{"system/*.cruds", "", "PUT", "/nodes/a/fhir/Patient/a-1", `{"resourceType":"Patient","id":"a-1"}`, "", allow},
		{"system/Patient.cud", "", "DELETE", "/nodes/a/fhir/Patient?identifier=x%7C1", "", "", 403},
		{"system/Patient.ds", "", "DELETE", "/nodes/a/fhir/Patient?identifier=x%7C1", "", "", allow},
		{"patient/*.cruds", "a.a-1", "DELETE", "/nodes/a/fhir/Patient/a-1", "", "", 403},
		// A transaction, entry by entry.
		{"user/Patient.c", "", "POST", "/nodes/a/fhir", transaction, "", 403},
		{"user/Patient.c user/Observation.d", "", "POST", "/nodes/a/fhir", transaction, "", allow},
		{"user/*.write", "", "POST", "/nodes/a/fhir", transaction, "", allow},
		{"system/*.cruds", "", "POST", "/nodes/a/fhir/Patient/a-1/$everything", "", "", allow},
		{"system/Patient.rs", "", "GET", "/nodes/a/fhir/Patient/a-1/$everything", "", "", 403},
	}
	for _, r := range rows {
		t.Run(fmt.Sprintf("%s as %s%s", r.method+" "+r.path, r.scope, map[bool]string{true: " for " + r.patient, false: ""}[r.patient != ""]), func(t *testing.T) {
			claims := map[string]any{"sub": "app", "scope": r.scope}
			if r.patient != "" {
				claims["patient"] = r.patient
			}
			tok, err := clients.Token(claims)
			if err != nil {
				t.Fatal(err)
			}
			req, _ := http.NewRequest(r.method, base+r.path, strings.NewReader(r.body))
			req.Header.Set("Authorization", "Bearer "+tok)
			req.Header.Set("Accept", "application/fhir+json")
			if r.body != "" {
				req.Header.Set("Content-Type", "application/fhir+json")
			}
			if k, v, ok := strings.Cut(r.header, ": "); ok {
				req.Header.Set(k, v)
			}
			before := len(m.Log())
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			// Asked: the member was sent the request itself (a search that finds a
			// confined read first is not the read).
			asked := slices.ContainsFunc(m.Log()[before:], func(got members.Request) bool {
				// A federated id (a.{id}) reaches the member as its own id.
				return got.Method == r.method && got.Path == strings.Replace(strings.Split(strings.TrimPrefix(r.path, "/nodes/a"), "?")[0], "/a.", "/", 1)
			})
			switch {
			case r.want == allow && (res.StatusCode == 401 || res.StatusCode == 403 || !asked):
				t.Fatalf("answered %d (the member asked: %v), want it allowed: %.300s", res.StatusCode, asked, body)
			case r.want != allow && (res.StatusCode != r.want || asked):
				t.Fatalf("answered %d (the member asked: %v), want %d: %.300s", res.StatusCode, asked, r.want, body)
			case r.want != allow:
				if err := fhirschema.Validate(body); err != nil || !strings.Contains(string(body), `"OperationOutcome"`) {
					t.Fatalf("the refusal is not an R4 OperationOutcome (%v): %s", err, body)
				}
			}
		})
	}
}

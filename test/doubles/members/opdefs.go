package members

import (
	"encoding/json"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"

	"github.com/ferrofed/ferrofed/test/double"
)

// The OperationDefinition store of a member with Options.OperationDefinitions: what
// a FHIR server that takes the gateway's stored queries does with them (update as
// create with the client's id, read, delete, search by url), plus a tamper knob for
// drift tests.

// maxOpdefBytes bounds one PUT body.
const maxOpdefBytes = 1 << 20

// opdefStore holds the member's OperationDefinitions by id, as JSON objects.
type opdefStore struct {
	m map[string]map[string]any
	// versions counts each id's updates (meta.versionId).
	versions map[string]int
}

// operationDefinition answers a request under OperationDefinition (rest: the path
// after it; body: a PUT's body).
func (s *Server) operationDefinition(r double.Request, base string, rest []string, body string) double.Answer {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.opdefs.m == nil {
		s.opdefs = opdefStore{m: map[string]map[string]any{}, versions: map[string]int{}}
	}
	switch {
	case len(rest) == 0 && r.Method == http.MethodGet:
		entries := []map[string]any{}
		want := r.Query.Get("url")
		for _, id := range slices.Sorted(maps.Keys(s.opdefs.m)) {
			od := s.opdefs.m[id]
			if want == "" || od["url"] == want {
				entries = append(entries, map[string]any{"fullUrl": base + "/OperationDefinition/" + id, "resource": od, "search": map[string]any{"mode": "match"}})
			}
		}
		return s.ok(http.StatusOK, map[string]any{"resourceType": "Bundle", "type": "searchset", "total": len(entries), "entry": entries})
	case len(rest) != 1:
		return s.fail(http.StatusNotFound, "not-found", "no such route under OperationDefinition")
	}
	id := rest[0]
	switch r.Method {
	case http.MethodGet:
		od, ok := s.opdefs.m[id]
		if !ok {
			return s.fail(http.StatusNotFound, "not-found", "no OperationDefinition/"+id)
		}
		return s.ok(http.StatusOK, od)
	case http.MethodPut:
		var od map[string]any
		if len(body) > maxOpdefBytes || json.Unmarshal([]byte(body), &od) != nil || od["resourceType"] != "OperationDefinition" {
			return s.fail(http.StatusBadRequest, "structure", "the body is not an OperationDefinition")
		}
		if od["id"] != id {
			return s.fail(http.StatusBadRequest, "invalid", "the resource's id is not the one in the URL")
		}
		_, existed := s.opdefs.m[id]
		s.opdefs.versions[id]++
		// A real server sets meta; the gateway's digest leaves it out.
		od["meta"] = map[string]any{"versionId": strconv.Itoa(s.opdefs.versions[id]), "lastUpdated": "2026-01-01T00:00:00Z"}
		s.opdefs.m[id] = od
		status := http.StatusOK
		if !existed {
			status = http.StatusCreated
		}
		a := s.ok(status, od)
		a.Header = http.Header{"Location": {base + "/OperationDefinition/" + url.PathEscape(id) + "/_history/" + strconv.Itoa(s.opdefs.versions[id])}}
		return a
	case http.MethodDelete:
		if _, ok := s.opdefs.m[id]; !ok {
			return s.fail(http.StatusNotFound, "not-found", "no OperationDefinition/"+id)
		}
		delete(s.opdefs.m, id)
		return double.Answer{Status: http.StatusNoContent}
	}
	return s.fail(http.StatusMethodNotAllowed, "not-supported", "OperationDefinition/{id} takes GET, PUT and DELETE")
}

// OperationDefinition is the member's copy of OperationDefinition/id, as JSON.
func (s *Server) OperationDefinition(id string) (json.RawMessage, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	od, ok := s.opdefs.m[id]
	if !ok {
		return nil, false
	}
	b, _ := json.Marshal(od)
	return b, true
}

// Tamper is the drift knob: it changes the member's copy of OperationDefinition/id
// with f (f may edit the map in place), or, with f nil, deletes it, as an
// administrator of the member might. It reports whether there was a copy.
func (s *Server) Tamper(id string, f func(od map[string]any)) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	od, ok := s.opdefs.m[id]
	if !ok {
		return false
	}
	if f == nil {
		delete(s.opdefs.m, id)
		return true
	}
	f(od)
	return true
}

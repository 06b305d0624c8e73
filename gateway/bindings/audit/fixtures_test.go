package audit_test

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/ferrofed/ferrofed/test/doubles/auditrepo"
)

// search is one federated search carrying marker in its query.
func (g *gateway) search(marker string) int {
	status, _ := g.Do(http.MethodGet, "/fhir/Patient?name="+url.QueryEscape(marker), g.Client, nil)
	return status
}

// delivered counts the repository's stored events whose decoded query holds marker.
func delivered(arr *auditrepo.Server, marker string) int {
	n := 0
	for _, e := range arr.Received() {
		for _, q := range e.Queries {
			if strings.Contains(q, marker) {
				n++
				break
			}
		}
	}
	return n
}

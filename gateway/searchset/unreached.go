package searchset

import (
	"fmt"

	"github.com/ferrofed/ferrofed/gateway/fhir"
)

// What a page says of the matches of a member the gateway cannot reach
// (docs/data-plane.md, "No silent loss"): a member whose answer holds fewer matches
// than its total with no next link to the rest, whose stream ends short of its total,
// whose next link the gateway does not follow, or that failed in the middle of a walk.

// Unreached is the warning of a member (named by id) whose further matches the page
// cannot reach: unlinked when it gave a next link the gateway does not follow (longer
// than maxCursor bytes, or not under its base), lost how many of its matches are
// unreachable by its total (0: unknown).
func Unreached(member string, unlinked bool, maxCursor, lost int) fhir.OperationOutcome {
	diag := "member " + member + " answered fewer matches than its total, and no next link to the rest" + UnreachedNote(lost)
	if unlinked {
		diag = fmt.Sprintf("member %s gave a next link the gateway does not follow (not under the member's own base, or longer than %d bytes): its further matches are not paged%s",
			member, maxCursor, UnreachedNote(lost))
	}
	return fhir.OperationOutcome{ResourceType: "OperationOutcome", Issue: []fhir.Issue{{Severity: "warning", Code: "incomplete", Diagnostics: diag}}}
}

// UnreachedNote is what an outcome adds for n matches of a member that following next
// will not return: nothing when n is not known (0 or less).
func UnreachedNote(n int) string {
	if n <= 0 {
		return ""
	}
	if n == 1 {
		return "; 1 of its matches is unreachable"
	}
	return fmt.Sprintf("; %d of its matches are unreachable", n)
}

// Less is a member's total less the lost matches a walk cannot reach; nil stays nil.
func Less(total *int, lost int) *int {
	if total == nil {
		return nil
	}
	t := max(*total-lost, 0)
	return &t
}

// Package smart is the logic of SMART on FHIR authorization on the data plane:
// what a token's scopes allow, and which patient a search names. It is pure: no
// HTTP, no gin, no configuration, no other ferrofed package. The middleware that
// reads a token, calls it and writes the 403 is built on it later.
//
// # Scopes
//
// Parse reads a token's scopes (the []string auth.Scopes returns) as the SMART App
// Launch 2.x specification defines them, on its page "Scopes and Launch Context"
// (https://hl7.org/fhir/smart-app-launch/scopes-and-launch-context.html):
//
//   - v2: context/Type.perms[?param=value&...], context one of patient, user and
//     system, Type a resource type or *, perms a non-empty subset of c r u d s
//     written in that order, each letter at most once (rs, cud, cruds). Anything else
//     (rc, rr, dus, an empty suffix) is ignored, as the specification allows.
//   - v1: context/Type.read, .write or .*, read as v2's .rs, .cud and .cruds, as the
//     specification says.
//
// Every other scope (openid, fhirUser, launch, launch/patient, offline_access,
// online_access, the operator's scopes, a malformed resource scope) grants no
// resource and is kept, in order, for the audit trail (Grants.Other). Parse reads at
// most MaxScopes (256) scopes of at most MaxScopeLen (512) bytes each, and counts the
// rest (Grants.Dropped): they grant nothing.
//
// A scope's query (patient/Observation.rs?category=laboratory) restricts its grant
// to requests and results that match it. A restriction is read as a URL query is
// and compared exactly; one that cannot be read (an item without a
// key or a value, a bad escape) makes the scope grant nothing, never everything.
package smart

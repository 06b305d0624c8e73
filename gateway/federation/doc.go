// Package federation is the gateway's federated data plane: the member registry and
// its HTTP clients, the parallel search over every member answered as one FHIR
// searchset Bundle with a meta.federation record per member, requests routed to one
// member and streamed back, the ask-all probe, and the Surface that plugs all of it
// (and the operator surface: probe, dependency report) into the gateway's server.
//
// Every request sent to a member for a client updates that member endpoint's state in
// the dependency tracker (package dependencies), from the member's own HTTP status and
// reachability; nothing here ever sends a request of its own to find out.
package federation

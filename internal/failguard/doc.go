// Package failguard slows down guessing without handing anyone a way to
// lock others out: it counts failed attempts only (a wrong password, a
// wrong proxy credential), per key (a client address, or an address and an
// account name), and past a key's free failures every further failure
// doubles the wait before that key may try again, up to a ceiling. A key
// idle for long enough starts over; the map is bounded, the stalest entry
// dropped first. It is the one home of that rule: the dashboard's sign-in
// and the proxy listener's credentials both use it.
//
// It knows nothing of HTTP, owners or sessions; ClientKey turns a remote
// address into the key of its client (an IPv6 client by its /64, the
// smallest block one subscriber usually holds).
package failguard

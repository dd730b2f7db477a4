package vault

import "github.com/agentvault/agentvault/vault/item"

// The item vocabulary and Secret live in the leaf package vault/item, so
// that a package naming items (tokens, policy, mcpd through them) need not
// link the vault. These names are the same types and values, kept so every
// caller of package vault reads as before; the definitions and their rules
// have one home, in vault/item.

// Kind is what an item is (item.Kind).
type Kind = item.Kind

const (
	KindCard     = item.KindCard
	KindLogin    = item.KindLogin
	KindIdentity = item.KindIdentity
	KindAddress  = item.KindAddress
)

// Field names one value of an item (item.Field).
type Field = item.Field

const (
	// Card.
	FieldNumber = item.FieldNumber
	FieldCVV    = item.FieldCVV
	FieldHolder = item.FieldHolder
	// Login.
	FieldEmail    = item.FieldEmail
	FieldUsername = item.FieldUsername
	FieldPassword = item.FieldPassword
	FieldTOTP     = item.FieldTOTP
	// Identity.
	FieldName  = item.FieldName
	FieldPhone = item.FieldPhone
	// Address.
	FieldLine1      = item.FieldLine1
	FieldLine2      = item.FieldLine2
	FieldCity       = item.FieldCity
	FieldRegion     = item.FieldRegion
	FieldPostalCode = item.FieldPostalCode
	FieldCountry    = item.FieldCountry
)

type (
	// Item is an item's metadata (item.Item).
	Item = item.Item
	// CardMeta is what may be shown about a card (item.CardMeta).
	CardMeta = item.CardMeta
	// LoginMeta is what may be shown about a login (item.LoginMeta).
	LoginMeta = item.LoginMeta
	// IdentityMeta is the owner's identity for forms (item.IdentityMeta).
	IdentityMeta = item.IdentityMeta
	// AddressMeta is a postal address (item.AddressMeta).
	AddressMeta = item.AddressMeta
	// PasswordPolicy is what the vault generated (item.PasswordPolicy).
	PasswordPolicy = item.PasswordPolicy
	// Secret is a real value, opaque and printed as REDACTED (item.Secret).
	Secret = item.Secret
)

// NewSecret copies b into a Secret (item.NewSecret). The caller should wipe
// b afterwards.
func NewSecret(b []byte) Secret { return item.NewSecret(b) }

// LoginLabel turns a registrable domain into a login's token label
// (item.LoginLabel).
func LoginLabel(domain string) string { return item.LoginLabel(domain) }

// takeSecret moves b into a Secret: the Secret holds a copy and b is wiped,
// so a buffer the vault decrypted into is not left behind in clear.
func takeSecret(b []byte) Secret {
	s := item.NewSecret(b)
	wipe(b)
	return s
}

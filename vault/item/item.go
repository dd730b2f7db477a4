package item

import "time"

// Kind is what an item is.
type Kind string

const (
	KindCard     Kind = "card"
	KindLogin    Kind = "login"
	KindIdentity Kind = "identity"
	KindAddress  Kind = "address"
)

// Field names one value of an item. Every field is stored encrypted; the
// ones for which IsSecret is true are also never typed into a page as their
// real value (a format-preserving stand-in is typed instead).
type Field string

const (
	// Card.
	FieldNumber Field = "number"
	FieldCVV    Field = "cvv"
	FieldHolder Field = "holder"
	// Login.
	FieldEmail    Field = "email"
	FieldUsername Field = "username"
	FieldPassword Field = "password"
	FieldTOTP     Field = "totp"
	// Identity.
	FieldName  Field = "name"
	FieldPhone Field = "phone"
	// Address.
	FieldLine1      Field = "line1"
	FieldLine2      Field = "line2"
	FieldCity       Field = "city"
	FieldRegion     Field = "region"
	FieldPostalCode Field = "postal_code"
	FieldCountry    Field = "country"
)

// IsSecret reports whether the field is a payment or sign-in secret: card
// number, CVV, password and TOTP (the seed is stored; only the code of the
// moment is ever released). These are always typed as stand-ins.
func (f Field) IsSecret() bool {
	switch f {
	case FieldNumber, FieldCVV, FieldPassword, FieldTOTP:
		return true
	}
	return false
}

// Item is an item's metadata: everything about it that is safe to list. It
// never holds a field's value; the values are sealed in the store and come out
// only through Vault.Release.
type Item struct {
	ID      string // opaque, stable, unique in the store (e.g. "itm_3f9a...")
	Org     string
	Owner   string
	Kind    Kind
	Label   string // token label: "1", "2" for cards (per-org sequence); "github" for logins; "1" for identity/address
	Created time.Time
	Updated time.Time

	// Fields lists the fields this item holds a value for.
	Fields []Field

	Card     *CardMeta     `json:",omitempty"`
	Login    *LoginMeta    `json:",omitempty"`
	Identity *IdentityMeta `json:",omitempty"`
	Address  *AddressMeta  `json:",omitempty"`
}

// Has reports whether the item holds a value for f.
func (it Item) Has(f Field) bool {
	for _, g := range it.Fields {
		if g == f {
			return true
		}
	}
	return false
}

// CardMeta is what may be shown about a card.
type CardMeta struct {
	Brand       string   // "visa", "mastercard", "amex", "discover", ... derived from the number
	Last4       string   // derived from the number
	NumberLen   int      // length of the number in digits
	CVVLen      int      // length of the CVV in digits (0 when live CVV: never stored)
	ExpiryMonth int      // 1..12
	ExpiryYear  int      // four digits
	HolderName  string   // as printed on the card
	AnySite     bool     // usable on any authorized destination
	Sites       []string // registrable domains or hosts, when not AnySite
	Billing     *AddressMeta
}

// LoginMeta is what may be shown about a login.
type LoginMeta struct {
	Site        string // registrable domain (eTLD+1) the login is locked to, with its subdomains
	Website     string // the URL the owner gave, for display
	Email       string // stored readable (seed 004, create_login)
	Username    string
	PasswordLen int
	HasTOTP     bool
	// TOTP settings when the seed came with other than the defaults (an
	// otpauth:// URI naming them); zero means SHA1, 6 digits, 30 s.
	TOTPAlgorithm string `json:",omitempty"`
	TOTPDigits    int    `json:",omitempty"`
	TOTPPeriod    int    `json:",omitempty"`
	// Generated is the policy the vault generated the password by (seed
	// 004 create_login); nil when the owner typed the password.
	Generated *PasswordPolicy `json:",omitempty"`
	// CreatedBy is the API key id that opened this login through
	// create_login; "" for a login the owner added. Only that key may
	// rotate its password or set its username, within a window.
	CreatedBy string `json:",omitempty"`
	// OwnerManaged is true once the owner replaced a generated password:
	// Generated then describes a password that no longer exists.
	OwnerManaged bool `json:",omitempty"`
}

// PasswordPolicy is what the vault generated: its length, its character
// classes and symbol alphabet. It says nothing about the value beyond
// what a site's validator checks. Which policies the vault generates is the
// vault's rule (vault.PasswordRules.Policy).
type PasswordPolicy struct {
	Length         int    `json:"length"`
	Lowercase      bool   `json:"lowercase"`
	Uppercase      bool   `json:"uppercase"`
	Digits         bool   `json:"digits"`
	Symbols        string `json:"symbols"` // the symbol alphabet; "" when noSymbols
	NoTripleRepeat bool   `json:"noTripleRepeat,omitempty"`
}

// IdentityMeta is the owner's identity for forms.
type IdentityMeta struct {
	Name  string
	Email string
	Phone string
}

// AddressMeta is a postal address.
type AddressMeta struct {
	Name       string `json:",omitempty"`
	Line1      string
	Line2      string `json:",omitempty"`
	City       string
	Region     string `json:",omitempty"`
	PostalCode string
	Country    string // ISO 3166-1 alpha-2
}

package vault

import (
	"context"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"

	agentvault "github.com/agentvault/agentvault"
)

// Config opens a Vault.
type Config struct {
	Store     Store
	MasterKey []byte // 32 bytes
	KeyID     string // optional; KeyIDFor(MasterKey) when empty
	// PreviousKeys are older master keys the store may still be wrapped
	// under, after a rotation that stopped half way (the CLI keeps the old
	// key file as <file>.old until a rotation is done). When the store's
	// active key is one of them, Open finishes the rotation to MasterKey.
	PreviousKeys [][]byte
	// AuditKey overrides the audit HMAC key. When nil, a key derived from
	// the first master key is created once and kept sealed in the store, so
	// audit HMACs stay comparable across key rotations.
	AuditKey []byte
	// KeyLoader, when set, is asked for a master key this process does not
	// hold, e.g. after another process (the owner CLI) rotated the key: it
	// re-reads the key file. A returned key is used only if its derived id
	// is the one asked for.
	KeyLoader func(keyID string) ([]byte, error)
	Now       func() time.Time
}

// Vault is the service over a Store. It is safe for concurrent use.
type Vault struct {
	store Store
	now   func() time.Time

	// rotMu: writers that wrap a new data key hold it shared; RotateKey
	// holds it exclusively, so no data key is wrapped under a key that is
	// being retired.
	rotMu sync.RWMutex

	mu       sync.RWMutex
	keys     map[string][]byte // every master key this process holds, by id
	activeID string

	loadKey func(keyID string) ([]byte, error)

	auditKey []byte

	depMu     sync.Mutex
	depSecret []byte

	meta metaCache // opened item metadata (metacache.go)
}

const (
	keyCheckPlain      = "agentvault key check v1"
	blobAuditKey       = "vault/audit-key"
	blobDeployment     = "vault/deployment-secret"
	reservedBlobPrefix = "vault/"
)

// Open checks the master key against the store (a wrong key is ErrSealed),
// registers it in an empty store, finishes an interrupted rotation, and loads
// the audit key.
func Open(ctx context.Context, cfg Config) (*Vault, error) {
	if cfg.Store == nil {
		return nil, agentvault.Errorf(agentvault.CodeInternal, "vault: no store")
	}
	if len(cfg.MasterKey) != keySize {
		return nil, agentvault.Errorf(agentvault.CodeInvalidInput, "master key must be %d bytes", keySize)
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	id := cfg.KeyID
	if id == "" {
		id = KeyIDFor(cfg.MasterKey)
	}
	v := &Vault{store: cfg.Store, now: now, keys: map[string][]byte{}, loadKey: cfg.KeyLoader}
	v.keys[id] = clone(cfg.MasterKey)
	for _, k := range cfg.PreviousKeys {
		if len(k) != keySize {
			return nil, agentvault.Errorf(agentvault.CodeInvalidInput, "previous master key must be %d bytes", keySize)
		}
		if pid := KeyIDFor(k); pid != id {
			v.keys[pid] = clone(k)
		}
	}

	recs, err := cfg.Store.Keys(ctx)
	if err != nil {
		return nil, err
	}
	if len(recs) == 0 {
		check, err := seal(cfg.MasterKey, id, []byte(keyCheckPlain), keyCheckAAD(id))
		if err != nil {
			return nil, err
		}
		err = cfg.Store.AddKey(ctx, KeyRecord{ID: id, State: KeyActive, Check: check, Created: now().UTC()})
		if err != nil && agentvault.ErrorCode(err) != agentvault.CodeConflict {
			return nil, err
		}
		if recs, err = cfg.Store.Keys(ctx); err != nil {
			return nil, err
		}
	}
	active := ""
	for _, r := range recs {
		if k, ok := v.keys[r.ID]; ok {
			pt, err := openWith(k, r.ID, r.Check, keyCheckAAD(r.ID))
			if err != nil || string(pt) != keyCheckPlain {
				return nil, ErrSealed
			}
		}
		if r.State == KeyActive {
			active = r.ID
		}
	}
	if _, ok := v.keys[active]; !ok {
		return nil, ErrSealed // retired, unknown or wrong key
	}
	v.activeID = active
	if active != id {
		if err := v.RotateKey(ctx, cfg.MasterKey, id); err != nil {
			return nil, err
		}
	}
	if err := v.loadAuditKey(ctx, cfg.AuditKey); err != nil {
		return nil, err
	}
	return v, nil
}

func clone(b []byte) []byte { return append([]byte(nil), b...) }

func (v *Vault) lookup(id string) ([]byte, bool) {
	v.mu.RLock()
	k, ok := v.keys[id]
	v.mu.RUnlock()
	if ok || v.loadKey == nil || id == "" {
		return k, ok
	}
	k, err := v.loadKey(id)
	if err != nil || len(k) != keySize || KeyIDFor(k) != id {
		return nil, false
	}
	k = clone(k)
	v.mu.Lock()
	v.keys[id] = k
	v.mu.Unlock()
	return k, true
}

// refreshActive adopts the store's active master key when another process
// rotated it, and reports whether the active key changed. A key this
// process cannot load (or whose check value does not open) is ErrSealed.
func (v *Vault) refreshActive(ctx context.Context) (bool, error) {
	recs, err := v.store.Keys(ctx)
	if err != nil {
		return false, err
	}
	cur, _ := v.active()
	for _, r := range recs {
		if r.State != KeyActive || r.ID == cur {
			continue
		}
		k, ok := v.lookup(r.ID)
		if !ok {
			return false, ErrSealed
		}
		if pt, err := openWith(k, r.ID, r.Check, keyCheckAAD(r.ID)); err != nil || string(pt) != keyCheckPlain {
			return false, ErrSealed
		}
		v.mu.Lock()
		v.activeID = r.ID
		v.mu.Unlock()
		return true, nil
	}
	return false, nil
}

// rewrap re-wraps rec's data key under the active master key.
func (v *Vault) rewrap(rec *ItemRecord) error {
	dek, err := v.dataKey(*rec)
	if err != nil {
		return err
	}
	defer wipe(dek)
	keyID, kek := v.active()
	w, err := seal(kek, keyID, dek, dekAAD(rec.Org, rec.ID))
	if err != nil {
		return err
	}
	rec.KeyID, rec.WrappedKey = keyID, w
	return nil
}

func (v *Vault) active() (string, []byte) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.activeID, v.keys[v.activeID]
}

// StoredActiveKeyID reads which master key the store says is active, which
// may differ from ActiveKeyID when another process rotated or a rotation
// failed part way. Tools use it to decide which key file to keep.
func (v *Vault) StoredActiveKeyID(ctx context.Context) (string, error) {
	recs, err := v.store.Keys(ctx)
	if err != nil {
		return "", err
	}
	for _, r := range recs {
		if r.State == KeyActive {
			return r.ID, nil
		}
	}
	return "", ErrNotFound
}

// ActiveKeyID is the id of the master key that wraps new data keys.
func (v *Vault) ActiveKeyID() string {
	id, _ := v.active()
	return id
}

func (v *Vault) loadAuditKey(ctx context.Context, override []byte) error {
	if override != nil {
		if len(override) < 16 {
			return agentvault.Errorf(agentvault.CodeInvalidInput, "audit key too short")
		}
		v.auditKey = clone(override)
		return nil
	}
	k, err := v.openOrCreateBlob(ctx, blobAuditKey, func() ([]byte, error) {
		_, master := v.active()
		return hkdf.Key(sha256.New, master, nil, "agentvault audit hmac v1", 32)
	})
	if err != nil {
		return err
	}
	v.auditKey = k
	return nil
}

// openOrCreateBlob returns the blob, creating it with create() exactly once
// across every process sharing the store.
func (v *Vault) openOrCreateBlob(ctx context.Context, name string, create func() ([]byte, error)) ([]byte, error) {
	b, err := v.openBlob(ctx, name)
	if err == nil || !errors.Is(err, ErrNotFound) {
		return b, err
	}
	fresh, err := create()
	if err != nil {
		return nil, agentvault.Wrap(agentvault.CodeInternal, err, "cannot derive a key")
	}
	err = v.sealBlob(ctx, name, fresh, true)
	if err == nil {
		return fresh, nil
	}
	if agentvault.ErrorCode(err) != agentvault.CodeConflict {
		return nil, err
	}
	return v.openBlob(ctx, name)
}

// newItemID returns an opaque id such as "itm_3f9a...".
func newItemID() (string, error) {
	b, err := randomBytes(12)
	if err != nil {
		return "", err
	}
	return "itm_" + hex.EncodeToString(b), nil
}

// itemMeta is what is sealed under field "meta".
type itemMeta struct {
	Card     *CardMeta     `json:",omitempty"`
	Login    *LoginMeta    `json:",omitempty"`
	Identity *IdentityMeta `json:",omitempty"`
	Address  *AddressMeta  `json:",omitempty"`
}

// value is one field to seal; the plaintext is wiped after sealing.
type value struct {
	field Field
	b     []byte
}

// put seals meta and values under a fresh data key and stores the item.
// Labels: when seq is true the label is the next number of the org's
// sequence; otherwise it is it.Label, with "-2", "-3"... appended on conflict.
func (v *Vault) put(ctx context.Context, it Item, meta itemMeta, values []value, seq bool) (Item, error) {
	v.rotMu.RLock()
	defer v.rotMu.RUnlock()
	var err error
	if it.ID, err = newItemID(); err != nil {
		return Item{}, err
	}
	now := v.now().UTC()
	it.Created, it.Updated = now, now
	it.Fields = it.Fields[:0]
	for _, val := range values {
		it.Fields = append(it.Fields, val.field)
	}
	rec, err := v.sealItem(it, meta, values)
	if err != nil {
		return Item{}, err
	}
	base, suffix := it.Label, 1
	for tries := 0; ; tries++ {
		if seq {
			n, err := v.store.NextLabel(ctx, it.Org, it.Kind)
			if err != nil {
				return Item{}, err
			}
			rec.Label = strconv.FormatInt(n, 10)
		} else if suffix > 1 {
			rec.Label = labelWithSuffix(base, suffix)
		}
		err = v.store.PutItem(ctx, rec)
		if err == nil {
			break
		}
		if agentvault.ErrorCode(err) != agentvault.CodeConflict || tries >= 50 {
			return Item{}, err
		}
		// A conflict is a taken label, or a master key another process
		// retired under us: then adopt the new key and try again.
		changed, rerr := v.refreshActive(ctx)
		if rerr != nil {
			return Item{}, rerr
		}
		if changed {
			if err := v.rewrap(&rec); err != nil {
				return Item{}, err
			}
			continue
		}
		suffix++
	}
	it.Label = rec.Label
	it.Card, it.Login, it.Identity, it.Address = meta.Card, meta.Login, meta.Identity, meta.Address
	if _, err := v.store.AppendAudit(ctx, AuditRecord{Time: now, Action: AuditAdd, Org: it.Org, ItemID: it.ID, Kind: it.Kind, Actor: it.Owner}); err != nil {
		return it, agentvault.Wrap(agentvault.CodeAuditUnavailable, err, "item added, but the audit log could not be written")
	}
	return it, nil
}

func (v *Vault) sealItem(it Item, meta itemMeta, values []value) (ItemRecord, error) {
	defer func() {
		for _, val := range values {
			wipe(val.b)
		}
	}()
	dek, err := newDataKey()
	if err != nil {
		return ItemRecord{}, err
	}
	defer wipe(dek)
	keyID, kek := v.active()
	rec := ItemRecord{
		ID: it.ID, Org: it.Org, Owner: it.Owner, Kind: it.Kind, Label: it.Label,
		Created: it.Created, Updated: it.Updated, Fields: append([]Field(nil), it.Fields...),
		KeyID: keyID, Values: make(map[Field][]byte, len(values)),
	}
	if rec.WrappedKey, err = seal(kek, keyID, dek, dekAAD(it.Org, it.ID)); err != nil {
		return ItemRecord{}, err
	}
	mj, err := json.Marshal(meta)
	if err != nil {
		return ItemRecord{}, agentvault.Wrap(agentvault.CodeInternal, err, "cannot encode item metadata")
	}
	defer wipe(mj)
	if rec.Meta, err = seal(dek, "", mj, fieldAAD(it.Org, it.ID, metaField())); err != nil {
		return ItemRecord{}, err
	}
	for _, val := range values {
		if rec.Values[val.field], err = seal(dek, "", val.b, fieldAAD(it.Org, it.ID, val.field)); err != nil {
			return ItemRecord{}, err
		}
	}
	return rec, nil
}

// dataKey unwraps an item's data key. The caller wipes it.
func (v *Vault) dataKey(rec ItemRecord) ([]byte, error) {
	return open(v.lookup, rec.WrappedKey, dekAAD(rec.Org, rec.ID))
}

// dekLookup opens value ciphertexts with the item's data key whatever key id
// their header names: the header is part of the additional data, so a
// foreign ciphertext (a wrapped key moved into a value) fails as corrupt.
func dekLookup(dek []byte) func(string) ([]byte, bool) {
	return func(string) ([]byte, bool) { return dek, true }
}

// openItem decrypts an item's metadata, or takes it from the cache of
// metadata opened from the same bytes.
func (v *Vault) openItem(rec ItemRecord) (Item, error) {
	m, ok := v.meta.get(rec)
	if !ok {
		var err error
		if m, err = v.openMeta(rec); err != nil {
			return Item{}, err
		}
		v.meta.put(rec, m)
	}
	it := Item{
		ID: rec.ID, Org: rec.Org, Owner: rec.Owner, Kind: rec.Kind, Label: rec.Label,
		Created: rec.Created, Updated: rec.Updated, Fields: append([]Field(nil), rec.Fields...),
		Card: m.Card, Login: m.Login, Identity: m.Identity, Address: m.Address,
	}
	return it, nil
}

// openMeta decrypts and decodes rec's sealed metadata.
func (v *Vault) openMeta(rec ItemRecord) (itemMeta, error) {
	dek, err := v.dataKey(rec)
	if err != nil {
		return itemMeta{}, err
	}
	defer wipe(dek)
	mj, err := open(dekLookup(dek), rec.Meta, fieldAAD(rec.Org, rec.ID, metaField()))
	if err != nil {
		return itemMeta{}, err
	}
	defer wipe(mj)
	var m itemMeta
	if err := json.Unmarshal(mj, &m); err != nil {
		return itemMeta{}, errCorrupt
	}
	return m, nil
}

// CardInput is a new card. Number and CVV are digits only.
type CardInput struct {
	Number, CVV Secret
	ExpiryMonth int
	ExpiryYear  int // four digits
	Holder      string
	Billing     *AddressMeta
	AnySite     bool
	Sites       []string
	LiveCVV     bool // the CVV is never stored; the owner types it per purchase
}

// LoginInput is a new login. Site (or, when empty, Website's host) is
// reduced to its registrable domain.
type LoginInput struct {
	Site, Website   string
	Email, Username string
	Password, TOTP  Secret
	// Generated is the policy the password was generated by, and
	// CreatedBy the API key that asked (create_login); both empty when
	// the owner adds a login.
	Generated *PasswordPolicy
	CreatedBy string
}

func checkOrgOwner(org, owner string) error {
	if org == "" || owner == "" || !plainText(org, 100) || !plainText(owner, 100) {
		return invalid("org and owner must be non-empty single lines")
	}
	return nil
}

// AddCard validates and stores a card; its label is the next card number of
// the org ("1", "2", ...).
func (v *Vault) AddCard(ctx context.Context, org, owner string, in CardInput) (Item, error) {
	if err := checkOrgOwner(org, owner); err != nil {
		return Item{}, err
	}
	brand, err := validateCard(in, v.now())
	if err != nil {
		return Item{}, err
	}
	sites, err := checkSites(in.AnySite, in.Sites)
	if err != nil {
		return Item{}, err
	}
	n := in.Number.InsecureRawBytes()
	meta := &CardMeta{
		Brand: brand, Last4: string(n[len(n)-4:]), NumberLen: len(n), CVVLen: in.CVV.Len(),
		ExpiryMonth: in.ExpiryMonth, ExpiryYear: in.ExpiryYear, HolderName: in.Holder,
		AnySite: in.AnySite, Sites: sites, Billing: in.Billing,
	}
	values := []value{{FieldNumber, clone(n)}}
	if !in.LiveCVV {
		values = append(values, value{FieldCVV, clone(in.CVV.InsecureRawBytes())})
	}
	if in.Holder != "" {
		values = append(values, value{FieldHolder, []byte(in.Holder)})
	}
	return v.put(ctx, Item{Org: org, Owner: owner, Kind: KindCard}, itemMeta{Card: meta}, values, true)
}

// AddLogin validates and stores a login; its label comes from the site
// ("github.com" -> "github", then "github-2" if taken).
func (v *Vault) AddLogin(ctx context.Context, org, owner string, in LoginInput) (Item, error) {
	if err := checkOrgOwner(org, owner); err != nil {
		return Item{}, err
	}
	domain, probs := checkLogin(in)
	if len(probs) > 0 {
		return Item{}, probs[0].Err
	}
	meta := &LoginMeta{
		Site: domain, Website: in.Website, Email: in.Email, Username: in.Username,
		PasswordLen: in.Password.Len(), HasTOTP: !in.TOTP.IsZero(),
		Generated: in.Generated, CreatedBy: in.CreatedBy,
	}
	var seed parsedSeed
	if !in.TOTP.IsZero() {
		// Stored as the bare base32 key; an otpauth URI's settings go to
		// the metadata (they are not secret, and the owner may see them).
		var err error
		if seed, err = parseTOTPSeed(in.TOTP.InsecureRawBytes()); err != nil {
			return Item{}, err
		}
		defer seed.wipe()
		meta.TOTPAlgorithm, meta.TOTPDigits, meta.TOTPPeriod = seed.alg, seed.digits, seed.period
	}
	var values []value
	if in.Email != "" {
		values = append(values, value{FieldEmail, []byte(in.Email)})
	}
	if in.Username != "" {
		values = append(values, value{FieldUsername, []byte(in.Username)})
	}
	values = append(values, value{FieldPassword, clone(in.Password.InsecureRawBytes())})
	if !in.TOTP.IsZero() {
		values = append(values, value{FieldTOTP, clone(seed.base32)})
	}
	it := Item{Org: org, Owner: owner, Kind: KindLogin, Label: LoginLabel(domain)}
	return v.put(ctx, it, itemMeta{Login: meta}, values, false)
}

// AddIdentity stores the owner's identity for forms (label "1", "2", ...).
func (v *Vault) AddIdentity(ctx context.Context, org, owner string, in IdentityMeta) (Item, error) {
	if err := checkOrgOwner(org, owner); err != nil {
		return Item{}, err
	}
	if err := validateIdentity(in); err != nil {
		return Item{}, err
	}
	values := []value{{FieldName, []byte(in.Name)}}
	if in.Email != "" {
		values = append(values, value{FieldEmail, []byte(in.Email)})
	}
	if in.Phone != "" {
		values = append(values, value{FieldPhone, []byte(in.Phone)})
	}
	m := in
	return v.put(ctx, Item{Org: org, Owner: owner, Kind: KindIdentity}, itemMeta{Identity: &m}, values, true)
}

// AddAddress stores a postal address (label "1", "2", ...).
func (v *Vault) AddAddress(ctx context.Context, org, owner string, in AddressMeta) (Item, error) {
	if err := checkOrgOwner(org, owner); err != nil {
		return Item{}, err
	}
	if err := validateAddress(in); err != nil {
		return Item{}, err
	}
	var values []value
	for _, fv := range []struct {
		f Field
		s string
	}{{FieldName, in.Name}, {FieldLine1, in.Line1}, {FieldLine2, in.Line2}, {FieldCity, in.City},
		{FieldRegion, in.Region}, {FieldPostalCode, in.PostalCode}, {FieldCountry, in.Country}} {
		if fv.s != "" {
			values = append(values, value{fv.f, []byte(fv.s)})
		}
	}
	m := in
	return v.put(ctx, Item{Org: org, Owner: owner, Kind: KindAddress}, itemMeta{Address: &m}, values, true)
}

// List returns the org's items (metadata only), oldest first; portal
// credentials (KindCredential) are not listed.
func (v *Vault) List(ctx context.Context, org string) ([]Item, error) {
	recs, err := v.store.ListItems(ctx, org)
	if err != nil {
		return nil, err
	}
	out := make([]Item, 0, len(recs))
	for _, r := range recs {
		if r.Kind == KindCredential {
			continue // not a fillable item (credential.go)
		}
		it, err := v.openItem(r)
		if err != nil {
			return nil, err
		}
		out = append(out, it)
	}
	return out, nil
}

// Get returns one item's metadata.
func (v *Vault) Get(ctx context.Context, org, id string) (Item, error) {
	rec, err := v.store.GetItem(ctx, org, id)
	if err != nil {
		return Item{}, err
	}
	return v.openItem(rec)
}

// GetByLabel returns the item a token names (kind and label).
func (v *Vault) GetByLabel(ctx context.Context, org string, kind Kind, label string) (Item, error) {
	rec, err := v.store.GetItemByLabel(ctx, org, kind, label)
	if err != nil {
		return Item{}, err
	}
	return v.openItem(rec)
}

// FreeLoginLabel is the label AddLogin would give a new login for domain
// now: LoginLabel(domain), or the first of "-2", "-3"... not taken. It is a
// forecast, never a reservation (another write may take it first): a
// signup request names its login in the run report before the login
// exists, and the site's bare name may already belong to another login.
func (v *Vault) FreeLoginLabel(ctx context.Context, org, domain string) (string, error) {
	base := LoginLabel(domain)
	for n := 1; n <= 50; n++ {
		l := base
		if n > 1 {
			l = labelWithSuffix(base, n)
		}
		_, err := v.store.GetItemByLabel(ctx, org, KindLogin, l)
		if errors.Is(err, ErrNotFound) {
			return l, nil
		}
		if err != nil {
			return "", err
		}
	}
	return "", agentvault.Errorf(agentvault.CodeConflict, "no free label for a login on this site")
}

// Remove deletes an item and records it in the audit log.
func (v *Vault) Remove(ctx context.Context, org, id string) error {
	rec, err := v.store.GetItem(ctx, org, id)
	if err != nil {
		return err
	}
	if err := v.store.DeleteItem(ctx, org, id); err != nil {
		return err
	}
	if _, err := v.store.AppendAudit(ctx, AuditRecord{Time: v.now().UTC(), Action: AuditRemove, Org: org, ItemID: id, Kind: rec.Kind}); err != nil {
		return agentvault.Wrap(agentvault.CodeAuditUnavailable, err, "item removed, but the audit log could not be written")
	}
	return nil
}

// ReleaseArgs says which value is released, for whom and why; all of it
// goes into the audit record.
type ReleaseArgs struct {
	Org, ItemID string
	Field       Field
	Destination string // host the value goes to on the wire
	Session     string
	Actor       string // API key id, "owner", ...
	Purpose     string // "substitution", "scrub", "fill", ...
}

// Release decrypts one field and returns it only after its audit record
// (with an HMAC of the value, never the value) is stored. If the audit log
// cannot be written the value is wiped and CodeAuditUnavailable returned
// (P12): no caller can get a value that was not audited.
//
// For FieldTOTP the value released is the RFC 6238 code of this moment
// (the vault's clock), never the seed (P23): the seed is decrypted, used
// and wiped here, and the audit HMAC is the code's.
func (v *Vault) Release(ctx context.Context, a ReleaseArgs) (Secret, error) {
	if a.Org == "" || a.ItemID == "" || a.Field == "" {
		return Secret{}, invalid("release needs org, item and field")
	}
	rec, err := v.store.GetItem(ctx, a.Org, a.ItemID)
	if err != nil {
		return Secret{}, err
	}
	ct, ok := rec.Values[a.Field]
	if !ok {
		return Secret{}, agentvault.Errorf(agentvault.CodeNotFound, "item has no %s field", fieldName(a.Field))
	}
	dek, err := v.dataKey(rec)
	if err != nil {
		return Secret{}, err
	}
	pt, err := open(dekLookup(dek), ct, fieldAAD(rec.Org, rec.ID, a.Field))
	wipe(dek)
	if err != nil {
		return Secret{}, err
	}
	if a.Field == FieldTOTP {
		code, err := v.totpOf(rec, pt)
		wipe(pt)
		if err != nil {
			return Secret{}, err
		}
		pt = code
	}
	mac := hmac.New(sha256.New, v.auditKey)
	mac.Write(pt)
	_, err = v.store.AppendAudit(ctx, AuditRecord{
		Time: v.now().UTC(), Action: AuditRelease, Org: rec.Org, ItemID: rec.ID, Kind: rec.Kind, Field: a.Field,
		Destination: a.Destination, Session: a.Session, Actor: a.Actor, Purpose: a.Purpose,
		ValueHMAC: mac.Sum(nil),
	})
	if err != nil {
		wipe(pt)
		return Secret{}, agentvault.Wrap(agentvault.CodeAuditUnavailable, err, "audit log unavailable; value not released")
	}
	s := takeSecret(pt)
	return s, nil
}

// totpOf is the code of this moment for a login's stored seed, with the
// settings its metadata names (or, for a seed stored whole as an otpauth
// URI before the settings moved to the metadata, the URI's).
func (v *Vault) totpOf(rec ItemRecord, seed []byte) ([]byte, error) {
	it, err := v.openItem(rec)
	if err != nil {
		return nil, err
	}
	s, err := parseTOTPSeed(seed)
	if err != nil {
		return nil, agentvault.Errorf(agentvault.CodeConflict, "the login's stored TOTP seed is not usable; add the login again")
	}
	defer s.wipe()
	p := defaultTOTPParams().withMeta(it.Login).withSeed(s)
	if !p.valid() {
		return nil, agentvault.Errorf(agentvault.CodeConflict, "the login's TOTP settings are not usable; add the login again")
	}
	return totpCode(s.key, v.now(), p), nil
}

// fieldName keeps user-controlled field names out of messages.
func fieldName(f Field) string {
	switch f {
	case FieldNumber, FieldCVV, FieldHolder, FieldEmail, FieldUsername, FieldPassword, FieldTOTP,
		FieldName, FieldPhone, FieldLine1, FieldLine2, FieldCity, FieldRegion, FieldPostalCode, FieldCountry:
		return string(f)
	}
	return "such"
}

// AuditHMAC is the HMAC an audit record holds for value, so an investigator
// can check a candidate value against the log.
func (v *Vault) AuditHMAC(value Secret) []byte {
	mac := hmac.New(sha256.New, v.auditKey)
	mac.Write(value.InsecureRawBytes())
	return mac.Sum(nil)
}

// Audit returns audit records in append order.
func (v *Vault) Audit(ctx context.Context, f AuditFilter) ([]AuditRecord, error) {
	return v.store.QueryAudit(ctx, f)
}

// RotateKey makes newKey the master key: every data key (items and blobs)
// is re-wrapped in one store transaction; values are not re-encrypted.
// Reads keep working throughout, because this process holds both keys.
func (v *Vault) RotateKey(ctx context.Context, newKey []byte, newKeyID string) error {
	if len(newKey) != keySize {
		return invalid("master key must be %d bytes", keySize)
	}
	if newKeyID == "" {
		newKeyID = KeyIDFor(newKey)
	}
	v.rotMu.Lock()
	defer v.rotMu.Unlock()
	oldID, _ := v.active()
	if newKeyID == oldID {
		return invalid("the new master key is the current one")
	}
	newKey = clone(newKey)
	v.mu.Lock()
	v.keys[newKeyID] = newKey
	v.mu.Unlock()
	check, err := seal(newKey, newKeyID, []byte(keyCheckPlain), keyCheckAAD(newKeyID))
	if err != nil {
		return err
	}
	err = v.store.Rotate(ctx, RotateArgs{
		NewKey: KeyRecord{ID: newKeyID, State: KeyActive, Check: check, Created: v.now().UTC()},
		Rewrap: func(w WrappedKey) ([]byte, error) {
			var aad []byte
			switch w.Owner {
			case "item":
				aad = dekAAD(w.Org, w.ID)
			case "blob":
				aad = blobDEKAAD(w.ID)
			default:
				return nil, agentvault.Errorf(agentvault.CodeInternal, "unknown wrapped key owner")
			}
			dek, err := open(v.lookup, w.Wrapped, aad)
			if err != nil {
				return nil, err
			}
			defer wipe(dek)
			return seal(newKey, newKeyID, dek, aad)
		},
	})
	if err != nil {
		// Another process may have finished this same rotation first
		// (the CLI and a starting proxyd both seeing <file>.old).
		if changed, rerr := v.refreshActive(ctx); rerr == nil && changed && v.ActiveKeyID() == newKeyID {
			return nil
		}
		return err
	}
	v.mu.Lock()
	v.activeID = newKeyID
	v.mu.Unlock()
	if _, err := v.store.AppendAudit(ctx, AuditRecord{Time: v.now().UTC(), Action: AuditRotate, Purpose: oldID + " -> " + newKeyID}); err != nil {
		return agentvault.Wrap(agentvault.CodeAuditUnavailable, err, "key rotated, but the audit log could not be written")
	}
	return nil
}

// SealBlob stores data sealed under its own data key, e.g. the MITM CA key.
// Names beginning with "vault/" are the vault's own.
func (v *Vault) SealBlob(ctx context.Context, name string, data []byte) error {
	if name == "" || strings.HasPrefix(name, reservedBlobPrefix) || !plainText(name, 200) {
		return invalid("blob name must be a single line not starting with %q", reservedBlobPrefix)
	}
	return v.sealBlob(ctx, name, data, false)
}

func (v *Vault) sealBlob(ctx context.Context, name string, data []byte, createOnly bool) error {
	v.rotMu.RLock()
	defer v.rotMu.RUnlock()
	for tries := 0; ; tries++ {
		err := v.putBlob(ctx, name, data, createOnly)
		if err == nil || agentvault.ErrorCode(err) != agentvault.CodeConflict || tries > 0 {
			return err
		}
		if changed, rerr := v.refreshActive(ctx); rerr != nil {
			return rerr
		} else if !changed {
			return err
		}
	}
}

func (v *Vault) putBlob(ctx context.Context, name string, data []byte, createOnly bool) error {
	dek, err := newDataKey()
	if err != nil {
		return err
	}
	defer wipe(dek)
	keyID, kek := v.active()
	wrapped, err := seal(kek, keyID, dek, blobDEKAAD(name))
	if err != nil {
		return err
	}
	ct, err := seal(dek, "", data, blobAAD(name))
	if err != nil {
		return err
	}
	return v.store.PutBlob(ctx, BlobRecord{Name: name, KeyID: keyID, WrappedKey: wrapped, Data: ct, Updated: v.now().UTC(), CreateOnly: createOnly})
}

// OpenBlob returns a blob's plaintext, or ErrNotFound.
func (v *Vault) OpenBlob(ctx context.Context, name string) ([]byte, error) {
	if strings.HasPrefix(name, reservedBlobPrefix) {
		return nil, ErrNotFound
	}
	return v.openBlob(ctx, name)
}

func (v *Vault) openBlob(ctx context.Context, name string) ([]byte, error) {
	rec, err := v.store.GetBlob(ctx, name)
	if err != nil {
		return nil, err
	}
	dek, err := open(v.lookup, rec.WrappedKey, blobDEKAAD(name))
	if err != nil {
		return nil, err
	}
	defer wipe(dek)
	return open(dekLookup(dek), rec.Data, blobAAD(name))
}

// RemoveBlob deletes blob name (e.g. a staged TOTP seed the owner turned
// down); a blob that is not there is no error.
func (v *Vault) RemoveBlob(ctx context.Context, name string) error {
	if name == "" || strings.HasPrefix(name, reservedBlobPrefix) {
		return invalid("blob name must be a single line not starting with %q", reservedBlobPrefix)
	}
	if err := v.store.DeleteBlob(ctx, name); err != nil && !errors.Is(err, ErrNotFound) {
		return err
	}
	return nil
}

// OpenOrCreateBlob returns blob name, sealing create()'s bytes as it when
// there is none yet: exactly once across every process sharing the store
// (replicas starting together on an empty Postgres all end with the first
// writer's blob, e.g. one MITM CA).
func (v *Vault) OpenOrCreateBlob(ctx context.Context, name string, create func() ([]byte, error)) ([]byte, error) {
	if name == "" || strings.HasPrefix(name, reservedBlobPrefix) || !plainText(name, 200) {
		return nil, invalid("blob name must be a single line not starting with %q", reservedBlobPrefix)
	}
	return v.openOrCreateBlob(ctx, name, create)
}

// DeploymentSecret is a random 32-byte secret created once per deployment
// and kept sealed in the store. tokens derives token suffixes from it.
func (v *Vault) DeploymentSecret(ctx context.Context) ([]byte, error) {
	v.depMu.Lock()
	defer v.depMu.Unlock()
	if v.depSecret == nil {
		s, err := v.openOrCreateBlob(ctx, blobDeployment, func() ([]byte, error) { return randomBytes(32) })
		if err != nil {
			return nil, err
		}
		v.depSecret = s
	}
	return clone(v.depSecret), nil
}

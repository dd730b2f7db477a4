package rewrite

import "slices"

// FieldSource names the part of a message a Field was found in.
type FieldSource uint8

const (
	// SourceURL is a URL path segment, an opaque part or userinfo.
	SourceURL FieldSource = iota + 1
	// SourceQuery is a key or value of the URL query.
	SourceQuery
	// SourceForm is a key or value of an application/x-www-form-urlencoded body.
	SourceForm
	// SourceJSON is a JSON string (object keys included) or number.
	SourceJSON
	// SourceMultipart is the body of a multipart part that is neither JSON
	// nor multipart itself, after its Content-Transfer-Encoding.
	SourceMultipart
	// SourceText is free text: a body of a type walked as text (text/*,
	// XML, unknown), a multipart preamble, part header block or epilogue.
	// Nothing in it has a name.
	SourceText
)

// Field is one value a walk offered to the Replacer, before replacement.
type Field struct {
	Source FieldSource
	// Path is the names that lead to Value, outermost first: a form or
	// query key; a multipart part's name, followed, inside a JSON part, by
	// the JSON path; a JSON object's member keys, where an array element
	// keeps its array's key ({"total":[5]} puts 5 at ["total"]). Empty for
	// URL segments, free text and a JSON value at the top level.
	Path []string
	// Group is shared by the fields that sit side by side: the pairs of one
	// form or query, the parts of one multipart body, the members of one
	// JSON object (with the scalars of its arrays). A currency field
	// applies to the amounts of its group.
	Group int
	// Value is the decoded value (percent-decoding, JSON escapes and
	// transfer encodings undone). It is only valid during the call.
	Value []byte
	// Name is set when Value is itself a name (a form or query key, a JSON
	// object key): the walk offers names to the Replacer too.
	Name bool
	// Number is set for a JSON number literal.
	Number bool
}

// FieldVisitor is an optional Replacer method. When the Replacer passed to
// Body, Form, JSON, Multipart or URL has it, VisitField is called once for
// every value offered to the Replacer, in order, just before the offer, with
// the same bytes: the fields a caller reads this way are exactly the ones
// offered for rewriting, parsed by the one parser (the wire amount check
// walks a request with a visitor that replaces nothing, and so reads what
// the substitution saw, P18). Header and the WebSocket functions do not
// call it. Without it no Field is built.
type FieldVisitor interface {
	VisitField(Field)
}

// visitor returns r's scratch wrapper when r has a FieldVisitor, else nil.
func visitor(r Replacer) *scratchReplacer {
	if sr, ok := r.(*scratchReplacer); ok && sr.visit != nil {
		return sr
	}
	return nil
}

// newGroup starts a group of side-by-side fields.
func (sr *scratchReplacer) newGroup() int {
	sr.groups++
	return sr.groups
}

// emit reports f, with the path prefix of an enclosing multipart part.
func (sr *scratchReplacer) emit(f Field) {
	if len(sr.prefix) > 0 {
		f.Path = append(slices.Clip(sr.prefix), f.Path...)
	}
	sr.visit.VisitField(f)
}

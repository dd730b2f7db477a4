package sqlite

// Migration 90 (numbered): running totals of the spending ledger per card,
// currency and calendar day or month, kept by triggers in the transaction
// that writes the ledger row. A reservation reads two rows instead of
// summing every entry of the card's day and month (the sum grew with the
// ledger: 16% of a purchase's CPU after a few thousand purchases). The
// triggers are the one place the totals change, so every writer of the
// ledger (Reserve, Cancel, a future one) keeps them right, and the first
// run fills them from the rows already there. period is "d:" + day or
// "m:" + month, so a day and a month never share a row.
func init() {
	numberedMigrations[ledgerTotalsMigration] = `
CREATE TABLE ledger_totals (
	card_id  TEXT NOT NULL,
	currency TEXT NOT NULL,
	period   TEXT NOT NULL,
	minor    INTEGER NOT NULL,
	PRIMARY KEY (card_id, currency, period)
) WITHOUT ROWID;
INSERT INTO ledger_totals (card_id, currency, period, minor)
	SELECT card_id, currency, 'd:' || day, sum(minor) FROM ledger GROUP BY card_id, currency, day;
INSERT INTO ledger_totals (card_id, currency, period, minor)
	SELECT card_id, currency, 'm:' || month, sum(minor) FROM ledger GROUP BY card_id, currency, month;
CREATE TRIGGER ledger_totals_insert AFTER INSERT ON ledger BEGIN
	INSERT OR IGNORE INTO ledger_totals (card_id, currency, period, minor) VALUES
		(NEW.card_id, NEW.currency, 'd:' || NEW.day, 0), (NEW.card_id, NEW.currency, 'm:' || NEW.month, 0);
	UPDATE ledger_totals SET minor = minor + NEW.minor
		WHERE card_id = NEW.card_id AND currency = NEW.currency AND period IN ('d:' || NEW.day, 'm:' || NEW.month);
END;
CREATE TRIGGER ledger_totals_delete AFTER DELETE ON ledger BEGIN
	UPDATE ledger_totals SET minor = minor - OLD.minor
		WHERE card_id = OLD.card_id AND currency = OLD.currency AND period IN ('d:' || OLD.day, 'm:' || OLD.month);
END;
CREATE TRIGGER ledger_totals_update AFTER UPDATE OF card_id, currency, day, month, minor ON ledger BEGIN
	UPDATE ledger_totals SET minor = minor - OLD.minor
		WHERE card_id = OLD.card_id AND currency = OLD.currency AND period IN ('d:' || OLD.day, 'm:' || OLD.month);
	INSERT OR IGNORE INTO ledger_totals (card_id, currency, period, minor) VALUES
		(NEW.card_id, NEW.currency, 'd:' || NEW.day, 0), (NEW.card_id, NEW.currency, 'm:' || NEW.month, 0);
	UPDATE ledger_totals SET minor = minor + NEW.minor
		WHERE card_id = NEW.card_id AND currency = NEW.currency AND period IN ('d:' || NEW.day, 'm:' || NEW.month);
END;
`
}

// ledgerTotalsMigration is the version of the migration above.
const ledgerTotalsMigration = 90

// Migration 271 (numbered): a reservation writes fewer pages. The ledger's
// day and month indexes served the sums that migration 90 replaced with
// running totals; nothing reads the ledger by them any more (an entry is
// read by its id), so they go. The insert trigger adds to both totals in
// one upsert instead of an insert-or-ignore and an update.
func init() {
	numberedMigrations[ledgerLeanInsertMigration] = `
DROP INDEX ledger_day;
DROP INDEX ledger_month;
DROP TRIGGER ledger_totals_insert;
CREATE TRIGGER ledger_totals_insert AFTER INSERT ON ledger BEGIN
	INSERT INTO ledger_totals (card_id, currency, period, minor) VALUES
		(NEW.card_id, NEW.currency, 'd:' || NEW.day, NEW.minor), (NEW.card_id, NEW.currency, 'm:' || NEW.month, NEW.minor)
		ON CONFLICT (card_id, currency, period) DO UPDATE SET minor = minor + excluded.minor;
END;
`
}

// ledgerLeanInsertMigration is the version of the migration above.
const ledgerLeanInsertMigration = 271

import { useEffect, useState, type FormEvent } from 'react';
import { useAction } from '../lib/use-action.js';

/**
 * "Keep … for N days": a whole number of days, where empty or 0 means no limit (null to the server). Used for
 * request bodies (Settings) and audit entries (Audit).
 */
export function RetentionDaysForm({
  id,
  label,
  max,
  placeholder,
  hint,
  load,
  save,
  savedText,
  className,
}: {
  id: string;
  label: string;
  /** The server's own bound. */
  max: number;
  placeholder: string;
  hint: string;
  /** Reads the stored value; keep it stable across renders (useCallback), as it is an effect's dependency. */
  load: () => Promise<number | null>;
  /** Stores the value and answers what is now stored. */
  save: (days: number | null) => Promise<number | null>;
  /** What the saved value means, after "Saved.". */
  savedText: (days: number | null) => string;
  className?: string;
}) {
  // null until the stored value is read: the field is not editable before it shows what is stored.
  const [days, setDays] = useState<string | null>(null);
  const [saved, setSaved] = useState<string | null>(null);
  const [done, setDone] = useState<string | null>(null);
  const { busy, error, setError, run } = useAction();
  useEffect(() => {
    let live = true;
    load().then(
      (stored) => {
        if (!live) return;
        const v = stored === null ? '' : String(stored);
        setDays(v);
        setSaved(v);
      },
      (err: unknown) => live && setError((err as Error).message),
    );
    return () => {
      live = false;
    };
  }, [load, setError]);

  const text = days ?? '';
  const n = text.trim() === '' ? 0 : Number(text);
  const invalid = !Number.isInteger(n) || n < 0 || n > max;

  async function submit(e: FormEvent): Promise<void> {
    e.preventDefault();
    if (invalid) return;
    setDone(null);
    await run(async () => {
      const stored = await save(n === 0 ? null : n);
      const v = stored === null ? '' : String(stored);
      setDays(v);
      setSaved(v);
      setDone(`Saved. ${savedText(stored)}`);
    });
  }

  return (
    <form className={`form form-narrow ${className ?? ''}`} onSubmit={(e) => void submit(e)}>
      <div className="field">
        <label htmlFor={id}>{label}</label>
        <div className="input-suffix-row">
          <input
            id={id}
            type="number"
            inputMode="numeric"
            min={0}
            max={max}
            step={1}
            className="input-short"
            placeholder={placeholder}
            disabled={days === null}
            value={text}
            aria-describedby={`${id}-hint`}
            aria-invalid={invalid || undefined}
            onChange={(e) => {
              setDays(e.target.value);
              setDone(null);
              setError(null);
            }}
          />
          <span>days</span>
          <button
            type="submit"
            className="btn btn-secondary"
            disabled={busy || days === null || days === saved || invalid}
          >
            {busy ? 'Saving…' : 'Save'}
          </button>
        </div>
        <span id={`${id}-hint`} className="hint">
          {hint}
        </span>
        {invalid && (
          <span className="form-error small" role="alert">
            A whole number of days from 0 to {max.toLocaleString('en-US')}.
          </span>
        )}
      </div>
      {(error !== null || done !== null) && (
        <div
          className={error !== null ? 'form-error' : 'form-success'}
          role={error !== null ? 'alert' : 'status'}
        >
          {error ?? done}
        </div>
      )}
    </form>
  );
}

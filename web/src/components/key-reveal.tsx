import { CopyButton } from './copy-button.js';

/** The one time a full key is on screen. */
export function KeyReveal({ value, label = 'Your new key' }: { value: string; label?: string }) {
  return (
    <div className="key-reveal">
      <div className="key-reveal-row">
        <code className="key-value" aria-label={label} data-testid="full-key">
          {value}
        </code>
        <CopyButton text={value} label="Copy key" />
      </div>
      <p className="key-reveal-note">
        <strong>Copy it now — you won't see this key again.</strong> keyrelay stores only a hash of it.
      </p>
    </div>
  );
}

import { useState } from 'react';
import { buildSnippets } from '../lib/snippets.js';
import { CopyButton } from './copy-button.js';
import { Tabs } from './tabs.js';

export function CodeBlock({ code, label }: { code: string; label?: string }) {
  return (
    <div className="code-block">
      <div className="code-head">
        <span>{label}</span>
        <CopyButton text={code} />
      </div>
      <pre tabIndex={0} aria-label={label}>
        <code>{code}</code>
      </pre>
    </div>
  );
}

export function Quickstart({
  publicUrl,
  fullKey,
  only,
}: {
  publicUrl: string;
  fullKey: string | null;
  only?: string[];
}) {
  const groups = buildSnippets(publicUrl, fullKey).filter((g) => !only || only.includes(g.id));
  const [groupId, setGroupId] = useState(groups[0]!.id);
  const group = groups.find((g) => g.id === groupId) ?? groups[0]!;
  const [variantByGroup, setVariantByGroup] = useState<Record<string, string>>({});
  const variant = group.variants.find((v) => v.id === variantByGroup[group.id]) ?? group.variants[0]!;

  return (
    <div className="quickstart">
      {groups.length > 1 && (
        <Tabs
          idPrefix="qs"
          label="Tool"
          items={groups.map((g) => ({ id: g.id, label: g.label }))}
          value={group.id}
          onChange={setGroupId}
        />
      )}
      <div id="qs-panel" role="tabpanel" aria-labelledby={`qs-tab-${group.id}`} className="quickstart-panel">
        <div className="quickstart-bar">
          <p className="muted small">{group.description}</p>
          {group.variants.length > 1 && (
            <Tabs
              idPrefix={`qs-${group.id}`}
              size="sm"
              label="Variant"
              items={group.variants.map((v) => ({ id: v.id, label: v.label }))}
              value={variant.id}
              onChange={(id) => setVariantByGroup((m) => ({ ...m, [group.id]: id }))}
            />
          )}
        </div>
        <CodeBlock code={variant.code} label={`${group.label} — ${variant.label}`} />
        {!fullKey && (
          <p className="muted small">
            The snippets read your key from <code>$KEYRELAY_KEY</code>. Set it with{' '}
            <code>export KEYRELAY_KEY=kr_…</code>
          </p>
        )}
      </div>
    </div>
  );
}

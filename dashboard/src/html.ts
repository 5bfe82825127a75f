import htm from 'htm';
import { h } from 'preact';

/** Tagged templates for preact elements: no JSX step, one small parser (htm). */
export const html = htm.bind(h);

/** A time as the page shows it: the viewer's local date and time. */
export const when = (iso: string) => new Date(iso).toLocaleString();

/**
 * Copies text (a key, a curl). The clipboard API exists only on secure pages (HTTPS or localhost): elsewhere the
 * text is selected for the user to copy, and nothing is thrown.
 */
export function copy(text: string, select?: Element | null): void {
  const fallback = () => {
    if (!select) return;
    const range = document.createRange();
    range.selectNodeContents(select);
    const sel = window.getSelection();
    sel?.removeAllRanges();
    sel?.addRange(range);
  };
  if (navigator.clipboard) navigator.clipboard.writeText(text).catch(fallback);
  else fallback();
}

/** A duration in milliseconds, short. */
export const ms = (n: number | null | undefined) =>
  n === null || n === undefined
    ? '–'
    : n >= 1000
      ? `${(n / 1000).toFixed(2)} s`
      : `${n.toFixed(n < 10 ? 2 : 0)} ms`;

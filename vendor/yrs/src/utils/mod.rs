pub mod client_hasher;

pub(crate) trait OptionExt<T> {
    fn get_or_init(&mut self) -> &mut T;
}

impl<T: Default> OptionExt<T> for Option<Box<T>> {
    fn get_or_init(&mut self) -> &mut T {
        self.get_or_insert_with(|| Box::new(T::default()))
    }
}

/// homeroom: sorts `items` by `key`, stably, through one sort of `(key, index)` pairs that
/// every caller shares. Each `sort_by` on a type of its own is a copy of the standard
/// library's sort (3-5 KB of Wasm each); yrs had seven, about half of the document kind's
/// sorting code in homeroom's Worker (vendor/README.md).
pub(crate) fn sort_by_u64<T>(items: &mut Vec<T>, key: impl Fn(&T) -> u64) {
    if items.len() < 2 {
        return;
    }
    let mut order: Vec<(u64, usize)> = items
        .iter()
        .enumerate()
        .map(|(i, item)| (key(item), i))
        .collect();
    // Pairs are distinct, so an unstable sort of them orders equal keys by index: stable.
    order.sort_unstable();
    let mut slots: Vec<Option<T>> = items.drain(..).map(Some).collect();
    items.extend(order.into_iter().filter_map(|(_, i)| slots[i].take()));
}

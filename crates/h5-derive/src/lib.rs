//! `#[derive(H5Type)]` for h5 (use it as `h5::H5Type`).
//!
//! - A struct with named fields, `#[repr(C)]` (checked: without it the derive is a compile
//!   error), becomes an HDF5 compound type whose members are the fields, named after them (or
//!   `#[h5(rename = "name")]`), at the offsets of the Rust layout, with the struct's size. Every
//!   field type must implement `h5::H5Type`; generic parameters get that bound.
//! - A fieldless enum with an integer `#[repr(u8 | i8 | u16 | i16 | u32 | i32 | u64 | i64)]`
//!   becomes an HDF5 enumeration type over that integer, one member per variant (named after it,
//!   or `#[h5(rename = "name")]`) with the variant's discriminant.
//!
//! Values are encoded and decoded field by field (no unsafe code); reading matches compound
//! members and enumeration members by name, like libhdf5's conversions.
//!
//! ```ignore
//! #[derive(h5::H5Type)]
//! #[repr(C)]
//! struct Particle {
//!     position: [f32; 3],
//!     #[h5(rename = "m")]
//!     mass: f64,
//!     kind: Kind,
//! }
//!
//! #[derive(h5::H5Type)]
//! #[repr(u8)]
//! enum Kind {
//!     Electron = 1,
//!     Proton = 2,
//! }
//! ```

use proc_macro::TokenStream;
use proc_macro2::{Span, TokenStream as Tokens, TokenTree};
use quote::quote;
use syn::{Attribute, Data, DeriveInput, Error, Fields, Ident, LitStr, parse_macro_input};

/// Derives `h5::H5Type` (see the crate documentation).
#[proc_macro_derive(H5Type, attributes(h5))]
pub fn derive_h5_type(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    let out = match &input.data {
        Data::Struct(s) => derive_struct(&input, &s.fields),
        Data::Enum(e) => derive_enum(&input, e),
        Data::Union(_) => Err(Error::new(
            input.ident.span(),
            "H5Type cannot be derived for unions",
        )),
    };
    out.unwrap_or_else(Error::into_compile_error).into()
}

/// The top-level identifiers of every `#[repr(...)]` attribute (`C`, `u8`, `packed`, ...).
fn repr_idents(attrs: &[Attribute]) -> Vec<Ident> {
    let mut out = Vec::new();
    for a in attrs.iter().filter(|a| a.path().is_ident("repr")) {
        if let syn::Meta::List(l) = &a.meta {
            for tt in l.tokens.clone() {
                if let TokenTree::Ident(i) = tt {
                    out.push(i);
                }
            }
        }
    }
    out
}

/// The HDF5 name of a field or variant: `#[h5(rename = "...")]` or the identifier.
fn h5_name(attrs: &[Attribute], ident: &Ident) -> syn::Result<String> {
    let mut name = None;
    for a in attrs.iter().filter(|a| a.path().is_ident("h5")) {
        a.parse_nested_meta(|meta| {
            if meta.path.is_ident("rename") {
                let s: LitStr = meta.value()?.parse()?;
                if s.value().is_empty() || s.value().contains('\0') {
                    return Err(meta.error("an HDF5 name must be non-empty without NUL"));
                }
                name = Some(s.value());
                Ok(())
            } else {
                Err(meta.error("unknown h5 attribute (expected `rename = \"...\"`)"))
            }
        })?;
    }
    Ok(name.unwrap_or_else(|| {
        let s = ident.to_string();
        s.strip_prefix("r#").map(str::to_owned).unwrap_or(s)
    }))
}

fn derive_struct(input: &DeriveInput, fields: &Fields) -> syn::Result<Tokens> {
    let name = &input.ident;
    if !repr_idents(&input.attrs).iter().any(|i| i == "C") {
        return Err(Error::new(
            name.span(),
            "H5Type needs #[repr(C)] on the struct: the HDF5 compound type uses the Rust \
             layout's field offsets",
        ));
    }
    if repr_idents(&input.attrs).iter().any(|i| i == "packed") {
        return Err(Error::new(
            name.span(),
            "H5Type cannot be derived for packed structs (their fields cannot be borrowed)",
        ));
    }
    let Fields::Named(named) = fields else {
        return Err(Error::new(
            name.span(),
            "H5Type can be derived for structs with named fields only",
        ));
    };
    if named.named.is_empty() {
        return Err(Error::new(
            name.span(),
            "H5Type needs at least one field (HDF5 compound types are not empty)",
        ));
    }
    let mut idents = Vec::new();
    let mut names = Vec::new();
    let mut types = Vec::new();
    for f in &named.named {
        let Some(ident) = &f.ident else {
            return Err(Error::new(name.span(), "a field without a name"));
        };
        names.push(h5_name(&f.attrs, ident)?);
        idents.push(ident.clone());
        types.push(f.ty.clone());
    }
    if let Some(dup) = names
        .iter()
        .enumerate()
        .find(|(i, n)| names[..*i].contains(n))
    {
        return Err(Error::new(
            name.span(),
            format!("two fields are named {:?} in HDF5", dup.1),
        ));
    }
    let mut generics = input.generics.clone();
    for p in generics.type_params_mut() {
        p.bounds.push(syn::parse_quote!(::h5::H5Type));
    }
    let (impl_g, ty_g, where_c) = generics.split_for_impl();
    let ty_name = name.to_string();
    Ok(quote! {
        impl #impl_g ::h5::H5Type for #name #ty_g #where_c {
            fn h5_type() -> ::h5::Datatype {
                ::h5::__private::compound(
                    ::core::mem::size_of::<Self>(),
                    ::std::vec![#((
                        #names,
                        ::core::mem::offset_of!(Self, #idents),
                        <#types as ::h5::H5Type>::h5_type(),
                    )),*],
                )
            }

            fn h5_size() -> usize {
                ::core::mem::size_of::<Self>()
            }

            fn h5_encode(
                &self,
                out: &mut [u8],
                ctx: &mut ::h5::EncodeCtx<'_>,
            ) -> ::h5::Result<()> {
                #(
                    ::h5::__private::encode_field(
                        &self.#idents,
                        out,
                        ::core::mem::offset_of!(Self, #idents),
                        #names,
                        ctx,
                    )?;
                )*
                ::core::result::Result::Ok(())
            }

            fn h5_decode(
                dt: &::h5::Datatype,
                bytes: &[u8],
                ctx: &::h5::DecodeCtx<'_>,
            ) -> ::h5::Result<Self> {
                let c = ::h5::__private::as_compound(dt, #ty_name)?;
                ::core::result::Result::Ok(Self {
                    #(
                        #idents: ::h5::__private::decode_field::<#types>(
                            c, bytes, #names, #ty_name, ctx,
                        )?,
                    )*
                })
            }
        }
    })
}

const INT_REPRS: [&str; 8] = ["u8", "i8", "u16", "i16", "u32", "i32", "u64", "i64"];

fn derive_enum(input: &DeriveInput, e: &syn::DataEnum) -> syn::Result<Tokens> {
    let name = &input.ident;
    let repr = repr_idents(&input.attrs)
        .into_iter()
        .find(|i| INT_REPRS.iter().any(|r| i == r))
        .ok_or_else(|| {
            Error::new(
                name.span(),
                "H5Type needs an integer #[repr(u8 | i8 | u16 | i16 | u32 | i32 | u64 | i64)] \
                 on the enum: it is the HDF5 enumeration's base type",
            )
        })?;
    if !input.generics.params.is_empty() {
        return Err(Error::new(
            name.span(),
            "H5Type cannot be derived for generic enums",
        ));
    }
    if e.variants.is_empty() {
        return Err(Error::new(name.span(), "H5Type needs at least one variant"));
    }
    let mut idents = Vec::new();
    let mut names = Vec::new();
    for v in &e.variants {
        if !matches!(v.fields, Fields::Unit) {
            return Err(Error::new(
                v.ident.span(),
                "H5Type can be derived for fieldless enums only",
            ));
        }
        names.push(h5_name(&v.attrs, &v.ident)?);
        idents.push(v.ident.clone());
    }
    let indices: Vec<usize> = (0..idents.len()).collect();
    let ty_name = name.to_string();
    let repr = Ident::new(&repr.to_string(), Span::call_site());
    Ok(quote! {
        impl ::h5::H5Type for #name {
            fn h5_type() -> ::h5::Datatype {
                ::h5::__private::enumeration::<#repr>(&[#((#names, Self::#idents as #repr)),*])
            }

            fn h5_size() -> usize {
                ::core::mem::size_of::<#repr>()
            }

            fn h5_encode(
                &self,
                out: &mut [u8],
                _ctx: &mut ::h5::EncodeCtx<'_>,
            ) -> ::h5::Result<()> {
                let v: #repr = match self {
                    #(Self::#idents => Self::#idents as #repr,)*
                };
                ::h5::__private::encode_enum(v, out)
            }

            fn h5_decode(
                dt: &::h5::Datatype,
                bytes: &[u8],
                _ctx: &::h5::DecodeCtx<'_>,
            ) -> ::h5::Result<Self> {
                let members: &[(&str, #repr)] = &[#((#names, Self::#idents as #repr)),*];
                match ::h5::__private::decode_enum::<#repr>(dt, bytes, members, #ty_name)? {
                    #(#indices => ::core::result::Result::Ok(Self::#idents),)*
                    _ => ::core::result::Result::Err(::h5::__private::bad_variant(#ty_name)),
                }
            }
        }
    })
}
